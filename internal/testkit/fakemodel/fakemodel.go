// Package fakemodel is a fake AI model server for tests that run the real
// agent CLIs: it speaks the Anthropic Messages API (POST /v1/messages, SSE
// streaming, what claude and claude-agent-acp call through
// ANTHROPIC_BASE_URL), the OpenAI Responses API (POST /v1/responses,
// SSE streaming, what codex and codex-acp call through a custom model
// provider), the Generative Language API (POST
// /v1beta/models/{model}:streamGenerateContent, :generateContent and
// :countTokens, what Gemini CLI calls through GOOGLE_GEMINI_BASE_URL) and
// the Chat Completions API (POST /v1/chat/completions, SSE streaming, what
// OpenCode calls for an OpenAI-compatible provider), on 127.0.0.1 only.
//
// A test scripts what the model answers — text, a tool call (Bash, an MCP
// tool), an HTTP error (401, 429, 500), a slow answer — and reads back the
// log of every request, with the usage the server reported, so it can
// assert what the CLI sent (a resumed turn carries the earlier turn) and
// that the figures the product books equal what the model served.
//
// A Server is safe for concurrent use.
package fakemodel

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// API names one of the wire protocols the server speaks.
type API string

const (
	// Anthropic is the Messages API: POST /v1/messages.
	Anthropic API = "anthropic"
	// OpenAI is the Responses API: POST /v1/responses (also /responses).
	OpenAI API = "openai"
	// Gemini is the Generative Language API: POST
	// /v1beta/models/{model}:streamGenerateContent (SSE with ?alt=sse) or
	// :generateContent. Its :countTokens is answered but is not a model
	// call: it is logged as Other and takes nothing from the script.
	Gemini API = "gemini"
	// OpenAIChat is the Chat Completions API: POST /v1/chat/completions
	// (SSE streaming), what an OpenAI-compatible client such as OpenCode
	// calls.
	OpenAIChat API = "openai-chat"
	// Other is any other path; the server answers 404 and logs it.
	Other API = "other"
)

// Usage is what one model call reports as consumed.
type Usage struct {
	InputTokens              int64
	OutputTokens             int64
	CacheReadInputTokens     int64
	CacheCreationInputTokens int64
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
	}
}

// DefaultUsage is served when a Reply names none: fixed figures, so that
// equal turns book equal usage.
var DefaultUsage = Usage{InputTokens: 1200, OutputTokens: 34}

// ToolCall is a tool the model asks the client to run.
type ToolCall struct {
	// Name is the tool's name as the client offered it: "Bash" for
	// claude's shell, "exec_command" or "shell" for codex's (whichever the
	// request offers), "run_shell_command" for Gemini CLI's,
	// "mcp__<server>__<tool>" for an MCP tool (Gemini CLI:
	// "mcp_<server>_<tool>"). For the
	// OpenAI API an MCP tool offered inside a namespace tool (codex 0.169:
	// one tool "mcp__<server>" of type "namespace") is called by the same
	// "mcp__<server>__<tool>" name; the server splits it as the client
	// expects.
	Name string
	// Input is the tool's arguments, encoded as JSON.
	Input any
}

// Reply is one scripted answer.
type Reply struct {
	// Thinking, when set, comes first: a thinking block (Anthropic) or a
	// reasoning item with this summary (OpenAI).
	Thinking string
	// Text is the assistant's text. With Tool set it comes before the
	// tool call (and may be empty).
	Text string
	// Tool makes the answer a tool call: the client runs it and asks again
	// with the result.
	Tool *ToolCall
	// Status, when not zero, answers with this HTTP error status (401,
	// 429, 500…) and an error body in the API's shape carrying Error.
	Status int
	// Error is the error's message; a default per status when empty.
	Error string
	// ErrorType is the error's type (and, for OpenAI, its code); a
	// default per status when empty. "insufficient_quota" with 429 is
	// OpenAI's exhausted quota, which codex does not retry.
	ErrorType string
	// Delay holds the answer back this long before its first byte (cut
	// short when the client goes away): a slow model.
	Delay time.Duration
	// Usage is reported for the call; DefaultUsage when zero.
	Usage Usage
}

// Request is one logged request and what the server answered.
type Request struct {
	// N numbers requests from 1 in arrival order.
	N      int
	API    API
	Method string
	Path   string
	// Key is the API key the client sent (x-api-key, x-goog-api-key or a
	// bearer token).
	Key string
	// Model and Stream are the body's fields of those names (for Gemini,
	// the model in the path and whether it is streamGenerateContent).
	Model  string
	Stream bool
	// Body is the raw request body.
	Body []byte
	// Status is the HTTP status answered (0 while the answer is held
	// back); Usage the usage reported (zero for an error).
	Status int
	Usage  Usage
	// Tool is the tool the answer called, "" for none.
	Tool string
	Time time.Time
}

// Contains reports whether the request body holds s (as it appears in the
// JSON encoding, so quote-free text is the safe thing to look for).
func (r Request) Contains(s string) bool { return bytes.Contains(r.Body, []byte(s)) }

// ToolNames lists the names of the tools the request offered, with the
// tools of a namespace tool as "<namespace>__<tool>" and a Gemini request's
// function declarations by their names.
func (r Request) ToolNames() []string {
	var body struct {
		Tools []json.RawMessage `json:"tools"`
	}
	_ = json.Unmarshal(r.Body, &body)
	var names []string
	for _, raw := range body.Tools {
		var t offeredTool
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		if t.Type == "namespace" {
			for _, sub := range t.Tools {
				names = append(names, t.Name+"__"+sub.Name)
			}
			continue
		}
		for _, fd := range t.FunctionDeclarations {
			names = append(names, fd.Name)
		}
		name := t.Name
		if name == "" && t.Function != nil {
			name = t.Function.Name
		}
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}

// offeredTool is a tool in a request's tools list, in either API's shape.
type offeredTool struct {
	Type     string `json:"type"`
	Name     string `json:"name"`
	Function *struct {
		Name string `json:"name"`
	} `json:"function"`
	Tools                []offeredTool `json:"tools"`
	FunctionDeclarations []offeredTool `json:"functionDeclarations"`
}

// Responder decides an answer from the request; ok false leaves it to the
// queue and the default.
type Responder func(Request) (reply Reply, ok bool)

// Server is a running fake model server.
type Server struct {
	ln  net.Listener
	srv *http.Server

	mu        sync.Mutex
	key       string
	queue     []Reply
	def       Reply
	responder Responder
	log       []Request
	n         int // requests numbered so far
	// limits maps each usage-limit marker seen to when its window ends
	// (limit.go).
	limits map[string]time.Time
}

// New starts a server on 127.0.0.1 on a free port. When key is not "",
// requests carrying another key are answered 401 as the real APIs do.
func New(key string) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{ln: ln, key: key, def: Reply{Text: "ok"}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Start is New for a test: it fails the test on error and closes the
// server when the test ends.
func Start(t testing.TB, key string) *Server {
	t.Helper()
	s, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// URL is the server's base URL, http://127.0.0.1:PORT, without a path:
// ANTHROPIC_BASE_URL takes it as is; an OpenAI provider's base_url is
// URL()+"/v1".
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server, ending answers in progress.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return s.srv.Close()
	}
	return nil
}

// SetKey changes the key requests must carry ("" accepts any).
func (s *Server) SetKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// Push queues replies: each model call takes the next one, in order.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// SetDefault sets the answer given when the queue is empty (at first a
// text reply "ok").
func (s *Server) SetDefault(r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.def = r
}

// SetResponder installs f, asked before the queue for every model call;
// nil removes it.
func (s *Server) SetResponder(f Responder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responder = f
}

// Requests returns a copy of the log of every request so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// Calls returns the logged model calls (Messages or Responses requests),
// leaving out other paths.
func (s *Server) Calls() []Request { return s.CallsSince(0) }

// CallsSince returns the model calls numbered above n (a Request.N, or
// len(Requests()) taken earlier), as ServedSince counts them: a request to
// another path shifts no index.
func (s *Server) CallsSince(n int) []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.API != Other && r.N > n {
			out = append(out, r)
		}
	}
	return out
}

// Served is the sum of the usage reported by every answer so far.
func (s *Server) Served() Usage {
	var u Usage
	for _, r := range s.Requests() {
		u = u.Add(r.Usage)
	}
	return u
}

// ServedSince is the sum of the usage reported by requests numbered above
// n (a Request.N, or len(Requests()) taken earlier).
func (s *Server) ServedSince(n int) Usage {
	var u Usage
	for _, r := range s.Requests() {
		if r.N > n {
			u = u.Add(r.Usage)
		}
	}
	return u
}

// maxBody bounds a request body read into the log.
const maxBody = 64 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	req := Request{Method: r.Method, Path: r.URL.Path, Body: body, Time: time.Now(), API: Other}
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages"):
		req.API = Anthropic
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		req.API = OpenAI
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		req.API = OpenAIChat
	case r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, ":generateContent") || strings.HasSuffix(r.URL.Path, ":streamGenerateContent")):
		req.API = Gemini
	}
	req.Key = cmp.Or(r.Header.Get("x-api-key"), r.Header.Get("x-goog-api-key"), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	var fields struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &fields)
	req.Model, req.Stream = fields.Model, fields.Stream
	if m, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1beta/models/"), ":"); ok && strings.HasPrefix(r.URL.Path, "/v1beta/models/") {
		req.Model, req.Stream = m, method == "streamGenerateContent"
	}

	s.mu.Lock()
	s.n++
	req.N = s.n
	// Logged on arrival (Status 0 until answered), so a test sees a slow
	// call while it is held back.
	idx := len(s.log)
	s.log = append(s.log, req)
	badKey := s.key != "" && req.Key != s.key
	var reply Reply
	var reset time.Time
	limited := false
	if req.API != Other && !badKey {
		if reset, limited = s.limitFor(req); !limited {
			// A refused request takes nothing from the script.
			reply = s.next(req)
		}
	}
	s.mu.Unlock()

	switch {
	case limited:
		req.Status = http.StatusTooManyRequests
		writeLimit(w, req, reset)
	case req.API == Other && r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, ":countTokens"):
		req.Status = http.StatusOK
		w.Header().Set("Content-Type", "application/json")
		// About four characters a token, as the real API counts.
		_ = json.NewEncoder(w).Encode(map[string]any{"totalTokens": len(body)/4 + 1})
	case req.API == Other:
		req.Status = http.StatusNotFound
		writeError(w, req.API, http.StatusNotFound, "", "not found: "+r.URL.Path)
	case badKey:
		req.Status = http.StatusUnauthorized
		writeError(w, req.API, http.StatusUnauthorized, "", "")
	default:
		if reply.Delay > 0 {
			t := time.NewTimer(reply.Delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
			}
		}
		if reply.Status != 0 {
			req.Status = reply.Status
			writeError(w, req.API, reply.Status, reply.ErrorType, reply.Error)
			break
		}
		if reply.Usage == (Usage{}) {
			reply.Usage = DefaultUsage
		}
		req.Status, req.Usage = http.StatusOK, reply.Usage
		if reply.Tool != nil {
			req.Tool = reply.Tool.Name
		}
		switch req.API {
		case Anthropic:
			writeMessages(w, req, reply)
		case Gemini:
			writeGenerate(w, req, reply)
		case OpenAIChat:
			writeChat(w, req, reply)
		default:
			writeResponses(w, req, reply)
		}
	}
	s.mu.Lock()
	s.log[idx] = req
	s.mu.Unlock()
}

// next picks the answer to a model call; s.mu is held.
func (s *Server) next(req Request) Reply {
	if s.responder != nil {
		if rep, ok := s.responder(req); ok {
			return rep
		}
	}
	if len(s.queue) > 0 {
		rep := s.queue[0]
		s.queue = s.queue[1:]
		return rep
	}
	return s.def
}

// errorTypes are the error types both APIs name per status.
var errorTypes = map[int][2]string{
	http.StatusUnauthorized:        {"authentication_error", "invalid x-api-key"},
	http.StatusForbidden:           {"permission_error", "permission denied"},
	http.StatusNotFound:            {"not_found_error", "not found"},
	http.StatusTooManyRequests:     {"rate_limit_error", "rate limit exceeded"},
	http.StatusInternalServerError: {"api_error", "internal server error"},
	529:                            {"overloaded_error", "overloaded"},
}

// writeError answers status with an error body in the API's shape; typ
// and msg default per status.
func writeError(w http.ResponseWriter, api API, status int, typ, msg string) {
	deftyp, def := "api_error", http.StatusText(status)
	if e, ok := errorTypes[status]; ok {
		deftyp, def = e[0], e[1]
	}
	if typ == "" {
		typ = deftyp
	}
	if msg == "" {
		msg = def
	}
	var body any
	switch api {
	case OpenAI:
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": typ}}
	case OpenAIChat:
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": typ}}
	case Gemini:
		body = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": geminiStatus(status)}}
	default:
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// sse writes server-sent events, flushing after each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return sse{w: w, f: f}
}

func (s sse) event(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		panic(fmt.Sprintf("fakemodel: encode %s: %v", name, err)) // only our own maps are encoded
	}
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	s.flush()
}

// data writes an event of one data line and no name, as Chat Completions
// streams are.
func (s sse) data(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakemodel: encode a chunk: %v", err)) // only our own maps are encoded
	}
	fmt.Fprintf(s.w, "data: %s\n\n", b)
	s.flush()
}

func (s sse) flush() {
	if s.f != nil {
		s.f.Flush()
	}
}

// input encodes a tool call's arguments, {} when nil.
func input(tc *ToolCall) string {
	if tc.Input == nil {
		return "{}"
	}
	b, err := json.Marshal(tc.Input)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// writeMessages answers a Messages API call, streamed or not.
func writeMessages(w http.ResponseWriter, req Request, rep Reply) {
	id := fmt.Sprintf("msg_fake%06d", req.N)
	model := req.Model
	if model == "" {
		model = "claude-fake"
	}
	stop := "end_turn"
	var blocks []map[string]any
	if rep.Thinking != "" {
		blocks = append(blocks, map[string]any{"type": "thinking", "thinking": rep.Thinking, "signature": "fakesig"})
	}
	if rep.Text != "" || rep.Tool == nil {
		blocks = append(blocks, map[string]any{"type": "text", "text": rep.Text})
	}
	if rep.Tool != nil {
		stop = "tool_use"
		var in any = map[string]any{}
		_ = json.Unmarshal([]byte(input(rep.Tool)), &in)
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_fake%06d", req.N), "name": rep.Tool.Name, "input": in})
	}
	u := rep.Usage
	usage := map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens,
		"cache_creation_input_tokens": u.CacheCreationInputTokens, "cache_read_input_tokens": u.CacheReadInputTokens}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	s := newSSE(w)
	start := map[string]any{"input_tokens": u.InputTokens, "output_tokens": 1,
		"cache_creation_input_tokens": u.CacheCreationInputTokens, "cache_read_input_tokens": u.CacheReadInputTokens}
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message",
		"role": "assistant", "model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": start}})
	for i, b := range blocks {
		if b["type"] == "thinking" {
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": b["thinking"]}})
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "signature_delta", "signature": b["signature"]}})
		} else if b["type"] == "text" {
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": b["text"]}})
		} else {
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": input(rep.Tool)}})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	s.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": usage})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}

// namespaceCall splits "mcp__server__tool" into the namespace tool the
// request offered ("mcp__server") and the tool in it, when the request
// offered one by that name.
func namespaceCall(req Request, name string) (ns, tool string, ok bool) {
	var body struct {
		Tools []offeredTool `json:"tools"`
	}
	_ = json.Unmarshal(req.Body, &body)
	for _, t := range body.Tools {
		if t.Type != "namespace" || !strings.HasPrefix(name, t.Name+"__") {
			continue
		}
		sub := strings.TrimPrefix(name, t.Name+"__")
		for _, st := range t.Tools {
			if st.Name == sub {
				return t.Name, sub, true
			}
		}
	}
	return "", "", false
}

// writeResponses answers a Responses API call, streamed or not.
func writeResponses(w http.ResponseWriter, req Request, rep Reply) {
	id := fmt.Sprintf("resp_fake%06d", req.N)
	model := req.Model
	if model == "" {
		model = "gpt-fake"
	}
	var items []map[string]any
	if rep.Thinking != "" {
		items = append(items, map[string]any{"type": "reasoning", "id": fmt.Sprintf("rs_fake%06d", req.N),
			"summary": []any{map[string]any{"type": "summary_text", "text": rep.Thinking}}})
	}
	if rep.Text != "" || rep.Tool == nil {
		items = append(items, map[string]any{"type": "message", "id": fmt.Sprintf("msg_fake%06d", req.N), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}}})
	}
	if rep.Tool != nil {
		item := map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_fake%06d", req.N), "call_id": fmt.Sprintf("call_fake%06d", req.N),
			"name": rep.Tool.Name, "arguments": input(rep.Tool), "status": "completed"}
		if ns, tool, ok := namespaceCall(req, rep.Tool.Name); ok {
			item["namespace"], item["name"] = ns, tool
		}
		items = append(items, item)
	}
	u := rep.Usage
	usage := map[string]any{"input_tokens": u.InputTokens + u.CacheReadInputTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CacheReadInputTokens},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          u.InputTokens + u.CacheReadInputTokens + u.OutputTokens}
	resp := map[string]any{"id": id, "object": "response", "created_at": req.Time.Unix(), "status": "completed", "model": model,
		"output": items, "usage": usage}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	s := newSSE(w)
	s.event("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": id, "object": "response",
		"status": "in_progress", "model": model, "output": []any{}}})
	for i, it := range items {
		s.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": i, "item": it})
		if it["type"] == "message" {
			s.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": it["id"], "output_index": i,
				"content_index": 0, "delta": rep.Text})
		}
		s.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": i, "item": it})
	}
	s.event("response.completed", map[string]any{"type": "response.completed", "response": resp})
}

// geminiStatus is the Google API status name of an HTTP status.
func geminiStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	}
	return "INTERNAL"
}

// writeGenerate answers a Generative Language API call: one
// GenerateContentResponse, or with streamGenerateContent an SSE stream of
// them (data lines only), the text first and the usage in the last.
func writeGenerate(w http.ResponseWriter, req Request, rep Reply) {
	var parts []map[string]any
	if rep.Thinking != "" {
		parts = append(parts, map[string]any{"text": rep.Thinking, "thought": true})
	}
	if rep.Text != "" || rep.Tool == nil {
		parts = append(parts, map[string]any{"text": rep.Text})
	}
	if rep.Tool != nil {
		var args any = map[string]any{}
		_ = json.Unmarshal([]byte(input(rep.Tool)), &args)
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": rep.Tool.Name, "args": args}})
	}
	u := rep.Usage
	usage := map[string]any{"promptTokenCount": u.InputTokens + u.CacheReadInputTokens, "candidatesTokenCount": u.OutputTokens,
		"totalTokenCount": u.InputTokens + u.CacheReadInputTokens + u.OutputTokens}
	if u.CacheReadInputTokens > 0 {
		usage["cachedContentTokenCount"] = u.CacheReadInputTokens
	}
	chunk := func(parts []map[string]any, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		out := map[string]any{"candidates": []any{cand}, "modelVersion": req.Model, "responseId": fmt.Sprintf("resp_fake%06d", req.N)}
		if last {
			cand["finishReason"] = "STOP"
			out["usageMetadata"] = usage
		}
		return out
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(chunk(parts, true))
		return
	}
	s := newSSE(w)
	for i, p := range parts {
		b, _ := json.Marshal(chunk([]map[string]any{p}, i == len(parts)-1))
		fmt.Fprintf(s.w, "data: %s\r\n\r\n", b)
		s.flush()
	}
}

// GeminiEnv is the environment ("KEY=value" entries) that points Gemini
// CLI at s with key, for a HOME whose .gemini/settings.json is
// GeminiSettings: the API base URL and key, and the model.
func (s *Server) GeminiEnv(key, model string) []string {
	return []string{
		"GOOGLE_GEMINI_BASE_URL=" + s.URL(),
		"GEMINI_API_KEY=" + key,
		"GEMINI_MODEL=" + model,
	}
}

// GeminiSettings is a ~/.gemini/settings.json for Gemini CLI against the
// fake: API-key auth (without it the CLI picks gateway auth for a moved
// base URL), and no telemetry, usage statistics, update checks or session
// cleanup.
const GeminiSettings = `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false},
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false, "sessionRetention": {"enabled": false}}
}
`

// ClaudeEnv is the environment ("KEY=value" entries) that points claude,
// or claude-agent-acp, at s with key, and switches off its traffic to
// anywhere else: telemetry, error reports, update checks, feature flags.
func (s *Server) ClaudeEnv(key string) []string {
	return []string{
		"ANTHROPIC_BASE_URL=" + s.URL(),
		"ANTHROPIC_API_KEY=" + key,
		"DISABLE_TELEMETRY=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISABLE_GROWTHBOOK=1",
		"CLAUDE_CODE_DISABLE_FEATURE_FLAGS=1",
	}
}

// CodexProvider is the model provider id CodexConfig defines.
const CodexProvider = "fake"

// CodexConfig is a config.toml for a test CODEX_HOME that points codex, or
// codex-acp, at s: a custom provider (CodexProvider) speaking the
// Responses API, whose key codex reads from the environment variable
// envKey, with model as the default model, no update check, no analytics
// and no plugins (codex 0.169 otherwise looks up github.com and
// chatgpt.com for its plugin marketplace). Append tables (an
// [mcp_servers.x], say) after it.
func (s *Server) CodexConfig(model, envKey string) string {
	return fmt.Sprintf(`model_provider = %q
model = %q
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false

[model_providers.%s]
name = "fake model server"
base_url = %q
wire_api = "responses"
env_key = %q
`, CodexProvider, model, CodexProvider, s.URL()+"/v1", envKey)
}
