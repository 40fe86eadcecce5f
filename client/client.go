// Package client is the one Go client of the bridge's HTTP API. The CLI, the
// coordinator daemon and the tests all use it, so that every consumer decodes
// errors, cursors and streams the same way.
//
// Every non-2xx answer comes back as an *agentbridge.Error with Status set,
// whatever the body was, so callers branch on codes (errors.As) rather than
// on HTTP details. Network failures are wrapped with the operation's name and
// keep their cause, so errors.Is(err, context.Canceled) still works.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// maxResponseBody caps how much of a non-stream answer is read. The server's
// largest answers are event pages (up to 10000 events of up to 1 MiB each in
// theory); 256 MiB keeps a broken or hostile server from exhausting memory
// without cutting off any answer a real bridge gives.
const maxResponseBody = 256 << 20

// maxWaitSeconds is the longest long-poll the contract allows; a longer
// wait is clamped rather than refused, since the caller simply polls again.
const maxWaitSeconds = 60

// maxErrorBody caps how much of an error answer is read.
const maxErrorBody = 64 << 10

// Client talks to one bridge server. It is safe for concurrent use: it holds
// no per-request state.
type Client struct {
	base  string
	token string
	// hc has no overall timeout: streams and long-polls legitimately last
	// minutes; every request is bounded by its context instead.
	hc *http.Client
}

// Option configures a Client at construction.
type Option func(*Client)

// WithToken sets the bearer token sent on every request. The token is never
// logged nor included in errors.
func WithToken(token string) Option {
	return func(c *Client) { c.token = token }
}

// New returns a client of the bridge at baseURL (such as
// "http://127.0.0.1:5111"); a trailing slash is ignored.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), hc: &http.Client{Transport: newTransport()}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// maxIdlePerHost is how many idle connections a client keeps to its
// bridge. The coordinator sends bursts (a presence change and a reply per
// run, 100 runs at max_concurrency 100): past net/http's default of two,
// every concurrent request opened a connection of its own and closed it
// after, a dial, an accept and a TIME_WAIT socket each.
const maxIdlePerHost = 128

// newTransport is net/http's default transport keeping maxIdlePerHost idle
// connections (or, when a program has replaced the default with a
// transport of another kind, a plain one from the environment's proxy
// settings).
func newTransport() *http.Transport {
	t, ok := http.DefaultTransport.(*http.Transport)
	if ok {
		t = t.Clone()
	} else {
		t = &http.Transport{Proxy: http.ProxyFromEnvironment, ForceAttemptHTTP2: true}
	}
	t.MaxIdleConns = max(t.MaxIdleConns, maxIdlePerHost)
	t.MaxIdleConnsPerHost = maxIdlePerHost
	return t
}

// URL returns the base URL the client talks to, so that callers can hand it
// on (the coordinator passes it to adapters as BRIDGE_URL).
func (c *Client) URL() string { return c.base }

// request describes one call: op names it in wrapped errors.
type request struct {
	op      string
	method  string
	path    string
	query   url.Values
	body    any
	header  http.Header
	wantOut any
	// raw, when set, is sent as the body as it is (an upload), of type
	// rawType and length rawLen (-1: unknown, sent chunked).
	raw     io.Reader
	rawType string
	rawLen  int64
}

// do performs r and decodes a 2xx JSON answer into r.wantOut.
func (c *Client) do(ctx context.Context, r request) error {
	resp, err := c.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if r.wantOut == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxResponseBody))
	if err := dec.Decode(r.wantOut); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("%s: %w", r.op, ctxErr)
		}
		return fmt.Errorf("%s: decode answer: %w", r.op, err)
	}
	return nil
}

// send performs r and returns the response of a 2xx answer; any other answer
// is closed and turned into an *agentbridge.Error.
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	u := c.base + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var body io.Reader
	if r.body != nil {
		// No HTML escaping: '<' as \u003c would spend six bytes of the
		// server's body cap on one.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r.body); err != nil {
			return nil, fmt.Errorf("%s: encode request: %w", r.op, err)
		}
		body = &buf
	}
	if r.raw != nil {
		body = r.raw
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.op, err)
	}
	req.Header.Set("Accept", "application/json")
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.raw != nil {
		req.Header.Set("Content-Type", r.rawType)
		if r.rawLen >= 0 {
			req.ContentLength = r.rawLen
		}
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if v := claimHeader(ctx); v != "" && r.method != http.MethodGet {
		// WithClaim: the bridge reads it on appends, receipts and presence.
		req.Header.Set(agentbridge.ClaimHeader, v)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// decodeError turns a non-2xx answer into an *agentbridge.Error: the
// server's own error when the body is the contract's error JSON, otherwise
// an error whose code follows from the status and whose message says what
// came back.
func decodeError(resp *http.Response) *agentbridge.Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var env struct {
		Error *agentbridge.Error `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err == nil && env.Error != nil && env.Error.Code != "" {
		e := env.Error
		e.Status = resp.StatusCode
		if e.Message == "" {
			e.Message = fmt.Sprintf("The server answered %s.", statusText(resp.StatusCode))
		}
		return e
	}
	msg := fmt.Sprintf("The server answered %s", statusText(resp.StatusCode))
	if snippet := strings.TrimSpace(string(bytes.ToValidUTF8(b, []byte("?")))); snippet != "" {
		if len(snippet) > 200 {
			snippet = snippet[:200] + "…"
		}
		msg += ": " + strings.Join(strings.Fields(snippet), " ")
	}
	return &agentbridge.Error{Code: codeForStatus(resp.StatusCode), Message: msg + ".", Status: resp.StatusCode}
}

func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("%d %s", code, t)
	}
	return strconv.Itoa(code)
}

// codeForStatus maps an HTTP status to the error code the server would have
// used, for answers that did not come from the bridge's own error path (a
// proxy, the HTTP layer's 431, a server of another kind).
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return agentbridge.ECodeInvalidField
	case http.StatusUnauthorized:
		return agentbridge.ECodeUnauthorized
	case http.StatusForbidden:
		return agentbridge.ECodeForbiddenHost
	case http.StatusNotFound:
		return agentbridge.ECodeNotFound
	case http.StatusMethodNotAllowed:
		return agentbridge.ECodeMethodNotAllowed
	case http.StatusRequestEntityTooLarge:
		return agentbridge.ECodeBodyTooLarge
	case http.StatusRequestHeaderFieldsTooLarge:
		return agentbridge.ECodeHeadersTooLarge
	case http.StatusUnsupportedMediaType:
		return agentbridge.ECodeUnsupportedMediaType
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return agentbridge.ECodeUnavailable
	default:
		return agentbridge.ECodeInternal
	}
}

func threadPath(id string, rest ...string) string {
	p := "/threads/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

// Ping asks GET /ping, which needs no token: the server's version and the
// participants it counts as humans.
func (c *Client) Ping(ctx context.Context) (agentbridge.ServerInfo, error) {
	var out agentbridge.ServerInfo
	err := c.do(ctx, request{op: "ping", method: http.MethodGet, path: "/ping", wantOut: &out})
	return out, err
}

// CreateThread creates a thread (the server appends its thread.created
// event). A taken client-chosen id is a thread_exists error.
func (c *Client) CreateThread(ctx context.Context, req agentbridge.CreateThreadRequest) (agentbridge.Thread, error) {
	body := map[string]string{}
	if req.ID != "" {
		body["id"] = req.ID
	}
	if req.Name != "" {
		body["name"] = req.Name
	}
	if req.From != "" {
		body["from"] = req.From
	}
	var th agentbridge.Thread
	err := c.do(ctx, request{op: "create thread", method: http.MethodPost, path: "/threads", body: body, wantOut: &th})
	return th, err
}

// Threads lists threads a page at a time: after is the id of the last thread
// of the previous page ("" for the first page), limit caps the page (0 = the
// server's default).
func (c *Client) Threads(ctx context.Context, after string, limit int) ([]agentbridge.Thread, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Threads []agentbridge.Thread `json:"threads"`
	}
	if err := c.do(ctx, request{op: "list threads", method: http.MethodGet, path: "/threads", query: q, wantOut: &out}); err != nil {
		return nil, err
	}
	return out.Threads, nil
}

// Thread returns one thread; an unknown id is a thread_not_found error.
func (c *Client) Thread(ctx context.Context, id string) (agentbridge.Thread, error) {
	var th agentbridge.Thread
	err := c.do(ctx, request{op: "get thread", method: http.MethodGet, path: threadPath(id), wantOut: &th})
	return th, err
}

// Append posts one event and returns it as committed. With an idempotency
// key, a retry returns the first event instead of storing a second one, so
// callers that may retry (the coordinator's replies) cannot double-post.
func (c *Client) Append(ctx context.Context, thread string, in agentbridge.EventInput, idempotencyKey string) (agentbridge.Event, error) {
	a, err := c.AppendAnswer(ctx, thread, in, idempotencyKey)
	return a.Event, err
}

// Appended is the bridge's whole answer to an append: the stored event,
// and whether it will have no effect, and why.
type Appended struct {
	Event agentbridge.Event `json:"event"`
	// Ignored is set when the bridge says the event changes nothing
	// (agentbridge.IgnoredEffect).
	Ignored *agentbridge.Ignored `json:"ignored"`
}

// AppendAnswer is Append returning the whole answer.
func (c *Client) AppendAnswer(ctx context.Context, thread string, in agentbridge.EventInput, idempotencyKey string) (Appended, error) {
	var h http.Header
	if idempotencyKey != "" {
		h = http.Header{"Idempotency-Key": {idempotencyKey}}
	}
	var out Appended
	err := c.do(ctx, request{op: "post event", method: http.MethodPost, path: threadPath(thread, "events"), body: in, header: h, wantOut: &out})
	return out, err
}

// ThreadEvents reads one thread's events in seq order. q.After < 0 means no
// after cursor; zero Until, Tail and Limit are left out; q.Since is the v0
// timestamp cursor.
func (c *Client) ThreadEvents(ctx context.Context, q agentbridge.ThreadEventsQuery) ([]agentbridge.Event, error) {
	v := url.Values{}
	if q.After >= 0 {
		v.Set("after", strconv.FormatInt(q.After, 10))
	}
	if q.Since != "" {
		v.Set("since", q.Since)
	}
	if q.Until > 0 {
		v.Set("until", strconv.FormatInt(q.Until, 10))
	}
	if q.Tail > 0 {
		v.Set("tail", strconv.Itoa(q.Tail))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out struct {
		Events []agentbridge.Event `json:"events"`
	}
	if err := c.do(ctx, request{op: "read thread events", method: http.MethodGet, path: threadPath(q.Thread, "events"), query: v, wantOut: &out}); err != nil {
		return nil, err
	}
	return out.Events, nil
}

// State returns a thread's derived state as of revision at (0 = now) and the
// seq it reflects.
func (c *Client) State(ctx context.Context, thread string, at int64) (agentbridge.ThreadState, int64, error) {
	q := url.Values{}
	if at > 0 {
		q.Set("at", strconv.FormatInt(at, 10))
	}
	var out struct {
		Seq   int64                   `json:"seq"`
		State agentbridge.ThreadState `json:"state"`
	}
	if err := c.do(ctx, request{op: "read thread state", method: http.MethodGet, path: threadPath(thread, "state"), query: q, wantOut: &out}); err != nil {
		return agentbridge.ThreadState{}, 0, err
	}
	return out.State, out.Seq, nil
}

// SetPresence reports a participant's presence in a thread; it is kept in
// the server's memory only and goes stale after the server's TTL.
func (c *Client) SetPresence(ctx context.Context, thread string, p agentbridge.PresenceInput) error {
	return c.do(ctx, request{op: "set presence", method: http.MethodPost, path: threadPath(thread, "presence"), body: p})
}

// Presence returns the participants' presence in a thread, stale ones
// included (marked Stale).
func (c *Client) Presence(ctx context.Context, thread string) ([]agentbridge.Presence, error) {
	list, _, err := c.PresenceTTL(ctx, thread)
	return list, err
}

// PresenceTTL is Presence with the bridge's presence TTL: how long a report
// stays fresh, so that a caller keeping presence from the stream can tell
// when it goes stale (0 from a bridge that does not say).
func (c *Client) PresenceTTL(ctx context.Context, thread string) ([]agentbridge.Presence, time.Duration, error) {
	var out struct {
		TTLSeconds   int                    `json:"ttl_seconds"`
		Participants []agentbridge.Presence `json:"participants"`
	}
	if err := c.do(ctx, request{op: "read presence", method: http.MethodGet, path: threadPath(thread, "presence"), wantOut: &out}); err != nil {
		return nil, 0, err
	}
	return out.Participants, time.Duration(out.TTLSeconds) * time.Second, nil
}

// Head returns the gseq of the log's last event (0 for an empty log), so a
// follower that starts "at the end" knows its cursor.
func (c *Client) Head(ctx context.Context) (int64, error) {
	var out struct {
		Head *int64 `json:"head"`
	}
	q := url.Values{"after": {"0"}, "limit": {"1"}}
	if err := c.do(ctx, request{op: "read head", method: http.MethodGet, path: "/events", query: q, wantOut: &out}); err != nil {
		return 0, err
	}
	if out.Head == nil {
		return 0, errors.New("read head: the server's answer has no head")
	}
	return *out.Head, nil
}

// Events long-polls the global log: events of all threads with gseq > after,
// in gseq order, at most limit (0 = the server's default). When nothing is
// newer the server holds the request up to wait (rounded up to whole
// seconds, clamped to 60 s). next is the cursor for the following call.
func (c *Client) Events(ctx context.Context, after int64, limit int, wait time.Duration) ([]agentbridge.Event, int64, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if wait > 0 {
		secs := min(int64((wait+time.Second-1)/time.Second), maxWaitSeconds)
		q.Set("wait", strconv.FormatInt(secs, 10))
	}
	var out struct {
		Events []agentbridge.Event `json:"events"`
		Next   int64               `json:"next"`
	}
	if err := c.do(ctx, request{op: "read events", method: http.MethodGet, path: "/events", query: q, wantOut: &out}); err != nil {
		return nil, after, err
	}
	return out.Events, out.Next, nil
}

// PutReceipt reports the latest state of one (event, participant) pair of
// a thread (in.Thread, in.Event, in.Participant); the answer is the stored
// receipt and whether it changed anything (a repeated report does not).
func (c *Client) PutReceipt(ctx context.Context, in agentbridge.ReceiptInput) (agentbridge.Receipt, bool, error) {
	var out struct {
		Receipt agentbridge.Receipt `json:"receipt"`
		Changed bool                `json:"changed"`
	}
	err := c.do(ctx, request{
		op: "put receipt", method: http.MethodPut,
		path: threadPath(in.Thread, "receipts", url.PathEscape(in.Event), url.PathEscape(in.Participant)), body: in, wantOut: &out,
	})
	if err != nil {
		return agentbridge.Receipt{}, false, err
	}
	return out.Receipt, out.Changed, nil
}

// Receipts answers q: a thread's receipts, only q.Event's when it is set,
// else from q.FromEvent on, at most q.Limit (0 = the server's cap).
func (c *Client) Receipts(ctx context.Context, q agentbridge.ReceiptsQuery) ([]agentbridge.Receipt, error) {
	var out struct {
		Receipts []agentbridge.Receipt `json:"receipts"`
	}
	v := url.Values{}
	if q.Event != "" {
		v.Set("event", q.Event)
	}
	if q.FromEvent != "" {
		v.Set("from_event", q.FromEvent)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if err := c.do(ctx, request{op: "list receipts", method: http.MethodGet, path: threadPath(q.Thread, "receipts"), query: v, wantOut: &out}); err != nil {
		return nil, err
	}
	return out.Receipts, nil
}
