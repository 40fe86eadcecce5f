package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// streamBatch is how many events a stream reads per query.
const streamBatch = 500

// stallTimeout drops a subscriber whose socket accepts nothing for this
// long: it holds a goroutine and a connection for nothing, and a client that
// comes back resumes with Last-Event-ID. (There is no server-wide
// WriteTimeout: it would cut every healthy stream.)
const stallTimeout = time.Minute

// maxWait caps the wait parameter of the long-poll, in seconds.
const maxWait = 60

// lastEventID parses the Last-Event-ID header (-1 when absent).
func lastEventID(r *http.Request) (int64, error) {
	v := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "Last-Event-ID", "The Last-Event-ID header must be the id of an event received from this stream, a whole number, not %q.", agentbridge.Clip(v, 41))
	}
	return n, nil
}

// sse writes Server-Sent Events to one subscriber. It adds no buffer of its
// own: net/http's response buffer already batches the writes of a batch
// until flush, and an idle subscriber should cost as little as possible.
type sse struct {
	rc *http.ResponseController
	w  http.ResponseWriter
}

// startSSE sends the stream headers. Everything that can fail with a JSON
// error must happen before it.
func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{rc: http.NewResponseController(w), w: w}
}

// arm gives the next writes stallTimeout to get through. Writers that do
// not support deadlines (httptest recorders) simply have none.
func (s *sse) arm() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(stallTimeout))
}

func (s *sse) event(id int64, ev agentbridge.Event) error {
	s.arm()
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	_, err = fmt.Fprintf(s.w, "id: %d\ndata: %s\n\n", id, b)
	return err
}

func (s *sse) presence(p agentbridge.Presence) error {
	s.arm()
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode presence: %w", err)
	}
	_, err = fmt.Fprintf(s.w, "event: presence\ndata: %s\n\n", b)
	return err
}

func (s *sse) comment(text string) error {
	s.arm()
	_, err := fmt.Fprintf(s.w, ": %s\n\n", text)
	return err
}

func (s *sse) flush() error {
	s.arm()
	return s.rc.Flush()
}

// follow is the loop shared by both SSE streams (wake after commit, style
// lesson 6): grab the event wake-up channel (events(): the store's notify
// for the global stream, the thread's for a thread stream) before
// querying, so no commit between the query and the wait is missed; write
// what the query found; otherwise wait for a wake, the keep-alive tick or
// the end of the request. The log is queried only when events may have
// come (the first time, after an event wake-up, after a full batch), not
// on receipt or presence wake-ups. fetch writes one batch and reports how
// many events it wrote; a full batch is followed at once by the next.
// Receipt changes of receiptThread ("" = every thread) made after version
// rver (taken before the stream's headers were sent, so that a client that
// has its headers misses no change) are interleaved too.
//
// A fetch that finds the database unreachable (unavailable, an outage)
// does not end the stream: it is tried again after dispatchRetry, or at
// the next wake-up, so that a stream open through a database restart
// goes on from its cursor instead of closing on every client at once.
func (s *Server) follow(ctx context.Context, out *sse, events func() <-chan struct{}, fetch func() (int, error), withPresence bool, receiptThread string, rver int64) error {
	tick := time.NewTicker(s.opts.KeepAlive)
	defer tick.Stop()
	var pwake <-chan struct{} // nil (never ready) without presence
	var pver int64
	if withPresence {
		_, pver = s.presence.changes.watch() // only changes made from now on
	}
	var wake <-chan struct{}
	var retry <-chan time.Time // nil (never ready) unless a fetch found the database away
	fetchNow := true
	for {
		n := 0
		if fetchNow {
			wake = events()
			var err error
			n, err = fetch()
			switch {
			case err == nil:
				retry = nil
			case agentbridge.ErrorCode(err) == agentbridge.ECodeUnavailable:
				retry = time.After(dispatchRetry)
			default:
				return err
			}
			fetchNow = n >= streamBatch
		}
		rwake, _ := s.receiptHub.watch()
		var receipts []agentbridge.Receipt
		receipts, rver = s.receiptHub.since(rver, receiptsOf(receiptThread))
		for _, rc := range receipts {
			if err := out.receipt(rc); err != nil {
				return err
			}
		}
		n += len(receipts)
		if withPresence {
			var changes []agentbridge.Presence
			pwake, _ = s.presence.changes.watch()
			changes, pver = s.presence.changes.since(pver, nil)
			for _, p := range changes {
				if err := out.presence(p); err != nil {
					return err
				}
			}
			n += len(changes)
		}
		if n > 0 {
			if err := out.flush(); err != nil {
				return err
			}
		}
		if fetchNow {
			continue
		}
		select {
		case <-wake:
			fetchNow = true
		case <-retry:
			fetchNow = true
		case <-pwake:
		case <-rwake:
		case <-tick.C:
			if err := out.comment("keep-alive"); err != nil {
				return err
			}
			if err := out.flush(); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

// endStream logs how a stream ended: quietly when the client went away or
// stalled (its writes failed), as a warning when the store failed.
func (s *Server) endStream(w http.ResponseWriter, r *http.Request, err error) {
	if err == nil || r.Context().Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	level := slog.LevelWarn
	if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, os.ErrDeadlineExceeded) {
		level = slog.LevelDebug
	}
	s.log.Log(r.Context(), level, "stream ended", "request_id", requestID(w), "path", r.URL.Path, "err", err)
}

// handleThreadStream is the per-thread SSE stream. Cursor precedence:
// Last-Event-ID (a reconnecting browser), after, since; none starts at the
// end.
func (s *Server) handleThreadStream(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id := chi.URLParam(r, "id")
	lei, err := lastEventID(r)
	if err != nil {
		return err
	}
	q, err := parseQuery(r, queryThreadStream)
	if err != nil {
		return err
	}
	after, since := q.int("after", -1), q.str("since")
	th, err := s.store.Thread(ctx, id)
	if err != nil {
		return storeErr("stream thread", err)
	}
	cursor, param := th.LastSeq, ""
	switch {
	case lei >= 0:
		cursor, param = lei, "Last-Event-ID"
	case after >= 0:
		cursor, param = after, "after"
	case since != "":
		cursor, param = -1, "since"
	}
	if cursor > th.LastSeq {
		return agentbridge.CursorAhead(id, param, cursor, th.LastSeq)
	}
	release, err := s.gate.Stream(ctx)
	if err != nil {
		return err
	}
	defer release()
	unsubscribe, err := s.subscribeThread(ctx, id)
	if err != nil {
		return err
	}
	defer unsubscribe()
	_, rver := s.receiptHub.watch()
	s.metrics.subscribers.WithLabelValues("thread").Inc()
	defer s.metrics.subscribers.WithLabelValues("thread").Dec()
	out := startSSE(w)
	if err := out.flush(); err != nil {
		s.endStream(w, r, err)
		return nil
	}
	// pos is the gseq the stream has read the log through, for the tail;
	// -1 until a read of the database gives it one.
	pos := int64(-1)
	fetch := func() (int, error) {
		var evs []agentbridge.Event
		if pos >= 0 {
			var ok bool
			if evs, pos, ok = s.tail.Since(pos, streamBatch, func(e *agentbridge.Event) bool { return e.Thread == id }); !ok {
				pos = -1
			}
		}
		if pos < 0 {
			// Taken before the query, which then reads at least that far.
			head, known := s.tail.Head()
			q := agentbridge.ThreadEventsQuery{Thread: id, After: cursor, Limit: streamBatch}
			if cursor < 0 {
				q.After, q.Since = -1, since
			}
			var err error
			if evs, err = s.store.ThreadEvents(ctx, q); err != nil {
				return 0, fmt.Errorf("stream thread events: %w", err)
			}
			switch {
			case !known || len(evs) == streamBatch:
				// More may follow in the database.
			case len(evs) > 0:
				pos = max(head, evs[len(evs)-1].GSeq)
			default:
				pos = head
			}
		}
		for _, ev := range evs {
			if err := out.event(ev.Seq, ev); err != nil {
				return 0, err
			}
			cursor = ev.Seq
		}
		return len(evs), nil
	}
	events := func() <-chan struct{} { return s.threadHub.watch(id) }
	s.endStream(w, r, s.follow(ctx, out, events, fetch, false, id, rver))
	return nil
}

// handleGlobalStream is the SSE stream over all threads, with presence
// changes interleaved as "event: presence".
func (s *Server) handleGlobalStream(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	lei, err := lastEventID(r)
	if err != nil {
		return err
	}
	q, err := parseQuery(r, queryGlobalStream)
	if err != nil {
		return err
	}
	after := q.int("after", -1)
	head, err := s.store.Head(ctx)
	if err != nil {
		return fmt.Errorf("stream head: %w", err)
	}
	cursor, param := head, ""
	switch {
	case lei >= 0:
		cursor, param = lei, "Last-Event-ID"
	case after >= 0:
		cursor, param = after, "after"
	}
	if cursor > head {
		return agentbridge.CursorAhead("", param, cursor, head)
	}
	release, err := s.gate.Stream(ctx)
	if err != nil {
		return err
	}
	defer release()
	_, rver := s.receiptHub.watch()
	s.metrics.subscribers.WithLabelValues("global").Inc()
	defer s.metrics.subscribers.WithLabelValues("global").Dec()
	out := startSSE(w)
	if err := out.flush(); err != nil {
		s.endStream(w, r, err)
		return nil
	}
	// The first read is the database's: the tail answers only for what
	// this bridge committed, and events another process wrote past its
	// head would wait for this bridge's next commit (storecore.Tail).
	read := false
	fetch := func() (int, error) {
		evs, _, ok := s.tail.Since(cursor, streamBatch, nil)
		if !ok || !read {
			var err error
			if evs, err = s.store.Events(ctx, cursor, streamBatch); err != nil {
				return 0, fmt.Errorf("stream events: %w", err)
			}
			read = true
		}
		for _, ev := range evs {
			if err := out.event(ev.GSeq, ev); err != nil {
				return 0, err
			}
			cursor = ev.GSeq
		}
		return len(evs), nil
	}
	s.endStream(w, r, s.follow(ctx, out, s.store.Notify, fetch, true, "", rver))
	return nil
}

// pollAnswer is the answer of the global long-poll. Next is the cursor for
// the following call; Head is the last gseq of the log.
type pollAnswer struct {
	Events []agentbridge.Event `json:"events"`
	Next   int64               `json:"next"`
	Head   int64               `json:"head"`
}

// handleEventsPoll is the global long-poll: it answers as soon as there is
// an event after the cursor, or empty after wait seconds.
func (s *Server) handleEventsPoll(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	q, err := parseQuery(r, queryPoll)
	if err != nil {
		return err
	}
	after, limit, wait := q.int("after", 0), q.int("limit", streamBatch), q.int("wait", 0)
	head, err := s.store.Head(ctx)
	if err != nil {
		return fmt.Errorf("poll head: %w", err)
	}
	if after > head {
		return agentbridge.CursorAhead("", "after", after, head)
	}
	if wait > 0 {
		// Only a poll that waits holds a connection like a stream.
		release, err := s.gate.Stream(ctx)
		if err != nil {
			return err
		}
		defer release()
	}
	s.metrics.subscribers.WithLabelValues("poll").Inc()
	defer s.metrics.subscribers.WithLabelValues("poll").Dec()
	timer := time.NewTimer(time.Duration(wait) * time.Second)
	defer timer.Stop()
	for {
		wake := s.store.Notify()
		evs, err := s.store.Events(ctx, after, int(limit))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return storeErr("poll events", err)
		}
		if len(evs) > 0 || wait == 0 {
			return s.writePoll(ctx, w, evs, after)
		}
		select {
		case <-wake:
		case <-timer.C:
			wait = 0
		case <-ctx.Done():
			return s.writePoll(context.WithoutCancel(ctx), w, nil, after)
		}
	}
}

func (s *Server) writePoll(ctx context.Context, w http.ResponseWriter, evs []agentbridge.Event, after int64) error {
	next := after
	if len(evs) > 0 {
		next = evs[len(evs)-1].GSeq
	}
	head, err := s.store.Head(ctx)
	if err != nil {
		return fmt.Errorf("poll head: %w", err)
	}
	if evs == nil {
		evs = []agentbridge.Event{}
	}
	httpjson.Write(w, http.StatusOK, pollAnswer{Events: evs, Next: next, Head: max(head, next)})
	return nil
}
