package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// handlePing answers without a token: liveness, version, the humans and
// the log's epoch.
func (s *Server) handlePing(w http.ResponseWriter, r *http.Request) error {
	info := agentbridge.ServerInfo{Status: "ok", Server: "agent-bridge", Version: s.opts.Version, Humans: s.opts.Humans}
	e := s.store.LogEpoch()
	info.Epoch = &e
	httpjson.Write(w, http.StatusOK, info)
	return nil
}

// handleHealthz answers ok when the store answers a trivial query and takes
// writes: while its last write was refused for an unreachable database (a
// full disk), it answers 503 with the reason, until a client's write
// succeeds. It does not probe with a write of its own: on a full disk a
// small write can fit where the refused append did not, and the answer
// would flap.
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) error {
	if reason, refused := s.store.WritesRefused(); refused {
		return agentbridge.Errorf(agentbridge.ECodeUnavailable,
			"The event store refuses writes (%s): appends are answered 503 until one succeeds.", reason)
	}
	if _, err := s.store.Head(r.Context()); err != nil {
		// Not logged here: a store's outage is logged once, when it
		// starts and when it ends, not on every probe.
		if agentbridge.ErrorCode(err) == agentbridge.ECodeUnavailable {
			return err
		}
		s.log.Debug("healthz: store error", "err", err)
		return agentbridge.Errorf(agentbridge.ECodeUnavailable, "The event store is not answering.")
	}
	httpjson.Write(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// exactReadMax is the largest declared Content-Length readBody allocates up
// front: events are small, and a client announcing a large body it never
// sends must not pin that much memory per connection.
const exactReadMax = 64 << 10

// readBody reads the whole request body, capped at MaxBody. A small body
// with a Content-Length within the cap is read into one exact-size buffer
// (the server's body reader already stops at that length); any other body
// goes through MaxBytesReader, which also closes the connection when it is
// too large.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= min(s.opts.MaxBody, exactReadMax) {
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, fmt.Errorf("read request body: %w", err)
		}
		return b, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, agentbridge.Errorf(agentbridge.ECodeBodyTooLarge, "The request body is larger than the limit of %d bytes.", s.opts.MaxBody)
		}
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return b, nil
}

// decodeStrict decodes a JSON object body into v. Fields lists the accepted
// fields: any other is unknown_field, a wrong type invalid_field. An empty
// body leaves v as is when allowEmpty.
func (s *Server) decodeStrict(w http.ResponseWriter, r *http.Request, v any, fields []string, allowEmpty bool) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if allowEmpty && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return httpjson.DecodeObject(body, v, fields)
}

// threadsPage is the answer of GET /threads.
type threadsPage struct {
	Threads []agentbridge.Thread `json:"threads"`
}

func (s *Server) handleThreadsGet(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, queryThreads)
	if err != nil {
		return err
	}
	threads, err := s.store.Threads(r.Context(), q.str("after"), int(q.int("limit", 0)))
	if err != nil {
		return fmt.Errorf("list threads: %w", err)
	}
	if threads == nil {
		threads = []agentbridge.Thread{}
	}
	httpjson.Write(w, http.StatusOK, threadsPage{Threads: threads})
	return nil
}

// createThreadBody is the body of POST /threads; every field is optional,
// but one that is sent must not be empty.
type createThreadBody struct {
	ID   *string `json:"id"`
	Name *string `json:"name"`
	From *string `json:"from"`
}

func (s *Server) handleThreadsPost(w http.ResponseWriter, r *http.Request) error {
	var body createThreadBody
	if err := s.decodeStrict(w, r, &body, []string{"id", "name", "from"}, true); err != nil {
		return err
	}
	var req agentbridge.CreateThreadRequest
	if body.ID != nil {
		if req.ID = *body.ID; !agentbridge.ThreadIDPattern.MatchString(req.ID) {
			return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "id", "The thread id %q is not valid: use 1 to 64 letters, digits or . _ -, starting with a letter or digit (or leave it out to get one).", agentbridge.Clip(req.ID, 41))
		}
	}
	if body.Name != nil {
		if req.Name = *body.Name; req.Name == "" {
			return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "name", "A thread name must not be empty; leave it out to get \"Untitled\".")
		}
		if err := agentbridge.ValidateThreadName(req.Name); err != nil {
			return err
		}
	}
	if body.From != nil {
		if req.From = *body.From; !agentbridge.ParticipantIDPattern.MatchString(req.From) {
			return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "from", "The sender id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit (or leave it out for \"user\").", agentbridge.Clip(req.From, 41))
		}
	}
	th, ev, err := s.store.CreateThread(r.Context(), req)
	if err != nil {
		return storeErr("create thread", err)
	}
	s.metrics.appends.Inc()
	httpjson.Write(w, http.StatusOK, struct {
		agentbridge.Thread
		Event agentbridge.Event `json:"event"`
	}{th, ev})
	return nil
}

// storeErr passes client errors through and wraps the rest with context.
func storeErr(op string, err error) error {
	var ae *agentbridge.Error
	if errors.As(err, &ae) {
		return ae
	}
	return fmt.Errorf("%s: %w", op, err)
}

func (s *Server) handleThreadGet(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r, queryNone); err != nil {
		return err
	}
	th, err := s.store.Thread(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		return storeErr("get thread", err)
	}
	httpjson.Write(w, http.StatusOK, th)
	return nil
}

// eventsPage is the answer of GET /threads/{id}/events.
type eventsPage struct {
	Events []agentbridge.Event `json:"events"`
	Count  int                 `json:"count"`
}

func (s *Server) handleEventsGet(w http.ResponseWriter, r *http.Request) error {
	p, err := parseQuery(r, queryThreadEvents)
	if err != nil {
		return err
	}
	q := agentbridge.ThreadEventsQuery{
		Thread: chi.URLParam(r, "id"), Since: p.str("since"), After: p.int("after", -1),
		Until: p.int("until", 0), Tail: int(p.int("tail", 0)), Limit: int(p.int("limit", 0)),
	}
	evs, err := s.store.ThreadEvents(r.Context(), q)
	if err != nil {
		return storeErr("thread events", err)
	}
	if evs == nil {
		evs = []agentbridge.Event{}
	}
	httpjson.Write(w, http.StatusOK, eventsPage{Events: evs, Count: len(evs)})
	return nil
}

// appendAnswer is the v0 answer of an event POST; Replayed is v1.
type appendAnswer struct {
	Received bool              `json:"received"`
	Event    agentbridge.Event `json:"event"`
	Replayed bool              `json:"replayed,omitempty"`
	// Ignored says why the event will have no effect, when it will not
	// (agentbridge.IgnoredEffect); absent otherwise, so older clients
	// see the answer they know.
	Ignored *agentbridge.Ignored `json:"ignored,omitempty"`
}

// handleEventsPost appends one event. Both a new event and an idempotent
// replay answer 200 (the v0 server answered 200; see docs/api.md).
func (s *Server) handleEventsPost(w http.ResponseWriter, r *http.Request) error {
	key := r.Header.Get("Idempotency-Key")
	if len(key) > agentbridge.MaxIdempotencyKeyLen {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "Idempotency-Key", "The Idempotency-Key header must be at most %d bytes.", agentbridge.MaxIdempotencyKeyLen)
	}
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	// The store validates the input (Append's contract), so the body is only
	// parsed here: an append is validated once, by the store.
	in, err := agentbridge.ParseEventInput(body)
	if err != nil {
		return err
	}
	thread := chi.URLParam(r, "id")
	if err := s.checkAppend(r, thread, in); err != nil {
		return err
	}
	fence, err := fenceOf(r)
	if err != nil {
		return err
	}
	res, err := s.store.Append(r.Context(), agentbridge.AppendRequest{Thread: thread, Input: in, IdempotencyKey: key, KeyScope: keyScope(credential(r)), Scope: credential(r).Scope, Fence: fence})
	if err != nil {
		return storeErr("append", err)
	}
	if !res.Replayed {
		s.metrics.appends.Inc()
		s.notifier.Event(res.Event)
		s.scheduleChanged(res.Event, res.Ignored)
	}
	ignored := res.Ignored
	if res.Replayed {
		// The store's note on a replay is only already_answered; the
		// rest is decided here, and comes first, as on the first try.
		if note := s.replayIgnored(r.Context(), res.Event); note != nil {
			ignored = note
		}
	}
	if ignored == nil {
		ignored = s.workspaceIgnored(r.Context(), res.Event)
	}
	writeAppendAnswer(w, res, ignored, &s.answers)
	return nil
}

// replayIgnored decides whether the replayed event e has no effect
// (agentbridge.IgnoredEffect), from the thread's state before it: a new
// event's note comes with the store's answer, decided under the write, but
// a replay's state before is not at hand there. It reads that state only
// for the events the decision may concern; a failed read leaves the note
// out rather than failing the answer, whose event is committed.
func (s *Server) replayIgnored(ctx context.Context, e agentbridge.Event) *agentbridge.Ignored {
	if !agentbridge.NeedsIgnoredCheck(e, s.opts.Humans) {
		return nil
	}
	// A message changes none of what the decision reads (invites, mutes,
	// pause), so the current state, one cheap read, stands for the state
	// before it; a control changes them, so the state before it is read.
	at := int64(0)
	if e.Type != agentbridge.TypeMessage {
		at = e.Seq - 1
	}
	before, _, err := s.store.State(ctx, e.Thread, at)
	if err != nil {
		s.log.Debug("state for the ignored check", "thread", e.Thread, "seq", e.Seq, "err", err)
		return nil
	}
	return agentbridge.IgnoredEffect(before, e, agentbridge.ControlOf(e), s.opts.Humans)
}

// stateAnswer is the answer of GET /threads/{id}/state.
type stateAnswer struct {
	Thread string                  `json:"thread"`
	Seq    int64                   `json:"seq"`
	State  agentbridge.ThreadState `json:"state"`
}

func (s *Server) handleStateGet(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, queryState)
	if err != nil {
		return err
	}
	at := q.int("at", 0)
	id := chi.URLParam(r, "id")
	st, seq, err := s.store.State(r.Context(), id, at)
	if err != nil {
		return storeErr("thread state", err)
	}
	httpjson.Write(w, http.StatusOK, stateAnswer{Thread: id, Seq: seq, State: st.Normalize()})
	return nil
}
