package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// FollowOptions says what to follow and what to do with it; see Follow.
type FollowOptions struct {
	// Thread is the thread to follow, by its seq; "" follows the global
	// log of all threads, by gseq.
	Thread string
	// Handle is called with each item, in order, from one goroutine.
	// Events at or before the cursor (a reconnect repeats some) are not
	// passed on; once Handle accepts an event, the cursor moves past it
	// (with Idle set: once Idle next returns nil). An error from Handle
	// ends Follow with that error, unless Retry says to retry it.
	Handle func(Item) error
	// Idle, when set, is called from the same goroutine whenever Follow
	// has handed Handle all it received and is about to wait for more:
	// a Handle that batches (the coordinator decides the events that
	// arrived together, then commits them at once) finishes its batch
	// here. Events count as accepted only when Idle returns nil; an error
	// is treated as Handle's, and a retry resumes after the events the
	// last successful Idle accepted, so that they are handed again.
	Idle func() error
	// Retry decides whether an error is worth another connection: one
	// from the connection, the bridge's refusal or Handle's. Nil retries
	// connection failures and the bridge's temporary answers (5xx, 408,
	// 429) and nothing else (see Permanent).
	Retry func(error) bool
	// CursorAhead, when set, is called when the bridge answers
	// cursor_ahead (its log ends before the cursor, as after a restore
	// from an older backup) with the bridge's head; Follow continues from
	// the cursor it returns. Unset, cursor_ahead is a refusal like any
	// other.
	CursorAhead func(head int64) (int64, error)
	// Resync, when set, is called with the cursor before each connection,
	// the first included, and Follow reads from the cursor it returns: the
	// coordinator checks there that the bridge's log is still the one its
	// cursor was kept in (a restore starts another). An error is treated
	// as Handle's.
	Resync func(cursor int64) (int64, error)
	// PollAfter, for the global log only, is how many failed stream
	// connections in a row make Follow long-poll (GET /events) for a
	// minute before trying the stream again, for proxies and networks
	// that break long responses; 0 never polls.
	PollAfter int
	// Backoff paces reconnects; the zero value is DefaultBackoffMin up to
	// DefaultBackoffMax.
	Backoff Backoff
	// Logger logs each reconnect at warn level; nil logs nothing.
	Logger *slog.Logger
	// Opened, when set, is called each time a connection opens, before
	// its first item: stream true for an SSE stream (which carries
	// presence and receipt changes), false for long-polling (events
	// only). Whatever a caller keeps from those changes may have missed
	// some while no connection was open.
	Opened func(stream bool)
}

// handleError marks an error as Handle's, so that the default Retry does
// not mistake it for a connection failure.
type handleError struct{ err error }

func (e *handleError) Error() string { return e.err.Error() }
func (e *handleError) Unwrap() error { return e.err }

// Follow reads a stream of the bridge from after cursor on, across broken
// connections: it reconnects with capped, jittered exponential backoff from
// the last event Handle accepted, so that a bridge restart loses and repeats
// nothing. It is the one follow loop of the coordinator, tail and the MCP
// server's wait_for_reply. It returns nil when ctx ends, or the error that
// Retry declined.
func (c *Client) Follow(ctx context.Context, cursor int64, o FollowOptions) error {
	retry := o.Retry
	if retry == nil {
		retry = func(err error) bool {
			var he *handleError
			return !errors.As(err, &he) && !Permanent(err)
		}
	}
	failures := 0
	// lost counts the failed connections since one last delivered, for
	// the log lines at the edges of an outage.
	lost := 0
	delivered := func() {
		o.Backoff.Reset()
		if lost > 0 && o.Logger != nil {
			o.Logger.Info("following the bridge again", "thread", o.Thread, "cursor", cursor, "failed_attempts", lost)
		}
		lost = 0
	}
	for ctx.Err() == nil {
		var opened bool
		var err error
		if o.Resync != nil {
			var to int64
			if to, err = o.Resync(cursor); err == nil {
				cursor = to
			}
		}
		before := cursor
		switch {
		case err != nil:
			err = &handleError{err}
		case o.Thread == "" && o.PollAfter > 0 && failures >= o.PollAfter:
			if o.Opened != nil {
				o.Opened(false)
			}
			opened, err = c.followPoll(ctx, &cursor, o.Handle, o.Idle, delivered)
			if err == nil {
				failures = 0 // polling ran its course; try the stream again
			}
		default:
			opened, err = c.followStream(ctx, &cursor, o, delivered)
			if opened {
				failures = 0
			} else {
				failures++
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		// The backoff starts again only after a connection that delivered:
		// one that opens and then fails on what it hands (a ledger that
		// refuses writes) is retried ever more slowly, not at once.
		if opened && (cursor != before || !isHandleError(err)) {
			delivered()
		}
		if err == nil {
			continue
		}
		var ae *agentbridge.Error
		if o.CursorAhead != nil && errors.As(err, &ae) && ae.Code == agentbridge.ECodeCursorAhead && ae.Head != nil {
			if cursor, err = o.CursorAhead(*ae.Head); err != nil {
				return err
			}
			continue
		}
		if !retry(err) {
			var he *handleError
			if errors.As(err, &he) {
				return he.err
			}
			return err
		}
		d := o.Backoff.Next()
		if o.Logger != nil {
			// One warning when following stops working; the attempts after
			// it, until one delivers, are logged at debug level.
			level := slog.LevelWarn
			if lost > 0 {
				level = slog.LevelDebug
			}
			o.Logger.Log(ctx, level, "bridge stream lost; reconnecting", "thread", o.Thread, "cursor", cursor, "err", err, "retry_in", d.Round(time.Millisecond))
		}
		lost++
		if !Sleep(ctx, d) {
			return nil
		}
	}
	return nil
}

// isHandleError reports whether err is Handle's or Idle's rather than the
// connection's.
func isHandleError(err error) bool {
	var he *handleError
	return errors.As(err, &he)
}

// followStream passes one stream connection's items to Handle until the
// stream or Handle fails; opened reports whether the connection opened.
//
// delivered is called each time the cursor moves, so that an outage's end
// is logged (and the backoff restarted) as soon as events flow again.
func (c *Client) followStream(ctx context.Context, cursor *int64, o FollowOptions, delivered func()) (opened bool, err error) {
	var st *Stream
	if o.Thread == "" {
		st, err = c.StreamAll(ctx, *cursor)
	} else {
		st, err = c.Stream(ctx, o.Thread, *cursor)
	}
	if err != nil {
		return false, err
	}
	defer st.Close()
	if o.Opened != nil {
		o.Opened(true)
	}
	// handled is the last event handed to Handle; *cursor follows it at
	// once, or, with Idle, when Idle accepts it.
	handled := *cursor
	if o.Idle != nil {
		st.OnIdle(func() error {
			if err := o.Idle(); err != nil {
				return err
			}
			if *cursor != handled {
				*cursor = handled
				delivered()
			}
			return nil
		})
	}
	for {
		it, err := st.Next()
		var ie *idleError
		switch {
		case errors.As(err, &ie):
			return true, &handleError{ie.err}
		case err == io.EOF:
			return true, errors.New("the bridge closed the stream")
		case err != nil:
			return true, err
		}
		pos := int64(-1)
		if it.Event != nil {
			pos = it.Event.Seq
			if o.Thread == "" {
				pos = it.Event.GSeq
			}
			if pos <= handled {
				continue
			}
		}
		if err := o.Handle(it); err != nil {
			return true, &handleError{err}
		}
		if pos >= 0 {
			handled = pos
			if o.Idle == nil {
				*cursor = pos
				delivered()
			}
		}
	}
}

// followPoll long-polls the global log for a minute, then returns so that
// the stream is tried again.
func (c *Client) followPoll(ctx context.Context, cursor *int64, handle func(Item) error, idle func() error, delivered func()) (answered bool, err error) {
	until := time.Now().Add(time.Minute)
	for time.Now().Before(until) {
		events, _, err := c.Events(ctx, *cursor, 500, 25*time.Second)
		if err != nil {
			return answered, err
		}
		answered = true
		handled := *cursor
		for i := range events {
			if events[i].GSeq <= handled {
				continue
			}
			if err := handle(Item{Event: &events[i]}); err != nil {
				return true, &handleError{err}
			}
			handled = events[i].GSeq
		}
		if idle != nil {
			if err := idle(); err != nil {
				return true, &handleError{err}
			}
		}
		if *cursor != handled {
			*cursor = handled
			delivered()
		}
	}
	return answered, nil
}

// Permanent reports whether the bridge refused for good, so that asking
// again cannot help: a client error (unknown thread, cursor ahead, wrong
// token …) other than a timeout or too many requests. A cap one
// credential reached (too_many: waiting claims, agent tokens, names) is
// for good too: it frees only as that credential's own work ends, which a
// retry in a loop would wait for.
func Permanent(err error) bool {
	var e *agentbridge.Error
	if !errors.As(err, &e) {
		return false
	}
	if e.Code == agentbridge.ECodeTooMany {
		return true
	}
	return e.Status >= 400 && e.Status < 500 && e.Status != http.StatusRequestTimeout && e.Status != http.StatusTooManyRequests
}
