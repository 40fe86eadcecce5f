package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// wait_for_reply's bounds. The default stays under the 60 s that Codex
// (tool_timeout_sec) and many MCP clients allow a tool call, so a call
// with no timeout_s works everywhere; the maximum is for clients whose tool
// timeout has been raised (docs/mcp.md says how).
const (
	defaultWait = 50 * time.Second
	maxWait     = 600 * time.Second
)

// progressEvery is how often a waiting call reports progress, for clients
// that asked for progress: some clients restart their tool timeout on it.
const progressEvery = 10 * time.Second

// Reconnect backoff of the wait's stream, as tail's.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// findPage is how many events one backwards page reads while looking for
// the awaited event; the event is usually among the thread's last ones.
const findPage = 200

type waitIn struct {
	Thread   string `json:"thread" jsonschema:"the thread id"`
	EventID  string `json:"event_id" jsonschema:"the id of the event to wait for a reply to (post returns it)"`
	TimeoutS int    `json:"timeout_s,omitempty" jsonschema:"how many seconds to wait at most (default 50, at most 600)"`
}

type waitOut struct {
	// Status is "replied" or "timeout".
	Status string `json:"status"`
	// Reply is the reply, when Status is "replied".
	Reply *eventOut `json:"reply,omitempty"`
	// WaitedS is how long the call waited, in whole seconds.
	WaitedS int `json:"waited_s"`
}

// Wait statuses.
const (
	statusReplied = "replied"
	statusTimeout = "timeout"
)

func (s *Server) waitForReply(ctx context.Context, req *mcp.CallToolRequest, in waitIn) (*mcp.CallToolResult, waitOut, error) {
	if err := checkThreadArg(in.Thread); err != nil {
		return nil, waitOut{}, err
	}
	if strings.TrimSpace(in.EventID) == "" {
		return nil, waitOut{}, invalidArg("event_id", "give the id of the event to wait for a reply to (post returns it)")
	}
	timeout := defaultWait
	switch {
	case in.TimeoutS < 0:
		return nil, waitOut{}, invalidArg("timeout_s", "must be between 1 and %d seconds, not %d", int(maxWait.Seconds()), in.TimeoutS)
	case in.TimeoutS > int(maxWait.Seconds()):
		return nil, waitOut{}, invalidArg("timeout_s", "%d seconds is over the maximum of %d; wait %d seconds and call again if nothing came", in.TimeoutS, int(maxWait.Seconds()), int(maxWait.Seconds()))
	case in.TimeoutS > 0:
		timeout = time.Duration(in.TimeoutS) * time.Second
	}
	start := time.Now()
	target, err := s.findEvent(ctx, in.Thread, in.EventID)
	if err != nil {
		return nil, waitOut{}, s.toolError(err)
	}
	if req != nil && req.Session != nil {
		if tok := req.Params.GetProgressToken(); tok != nil {
			pctx, stop := context.WithCancel(ctx)
			defer stop()
			go s.reportProgress(pctx, req.Session, tok, start, timeout)
		}
	}
	reply, err := s.awaitReply(ctx, in.Thread, target, timeout)
	waited := int(time.Since(start).Seconds())
	switch {
	case err == nil:
		var b strings.Builder
		fmt.Fprintf(&b, "%s replied:\n", reply.From)
		writeEvent(&b, reply)
		out := toEventOut(reply)
		return textResult(b.String()), waitOut{Status: statusReplied, Reply: &out, WaitedS: waited}, nil
	case errors.Is(err, errWaitTimeout):
		msg := fmt.Sprintf("No reply to %s in %s after %d s. Call wait_for_reply again to keep waiting, or read_thread to see what happened.", in.EventID, in.Thread, int(timeout.Seconds()))
		return textResult(msg), waitOut{Status: statusTimeout, WaitedS: waited}, nil
	default:
		return nil, waitOut{}, s.toolError(err)
	}
}

// errWaitTimeout ends a wait whose own timeout passed, as opposed to a
// caller that gave up (cancellation).
var errWaitTimeout = errors.New("no reply within the timeout")

// awaitReply follows the thread's stream from the awaited event on, so a
// reply posted before the call is found as well as one posted during it,
// until a message from someone else whose reply_to is the event arrives.
// client.Follow reopens a broken stream from the last event seen. It
// returns errWaitTimeout when timeout passes and ctx's error when ctx ends
// first.
func (s *Server) awaitReply(ctx context.Context, thread string, target agentbridge.Event, timeout time.Duration) (agentbridge.Event, error) {
	wctx, cancel := context.WithTimeoutCause(ctx, timeout, errWaitTimeout)
	defer cancel()
	var reply agentbridge.Event
	err := s.c.Follow(wctx, target.Seq, client.FollowOptions{
		Thread:  thread,
		Backoff: client.Backoff{Min: backoffMin, Max: backoffMax},
		Logger:  s.log.With("tool", "wait_for_reply"),
		Handle: func(it client.Item) error {
			e := it.Event
			if e != nil && e.Type == agentbridge.TypeMessage && e.Meta.ReplyTo == target.ID && e.From != s.as {
				reply = *e
				return errReplied
			}
			return nil
		},
	})
	switch {
	case errors.Is(err, errReplied):
		return reply, nil
	case ctx.Err() != nil:
		return agentbridge.Event{}, ctx.Err()
	case wctx.Err() != nil:
		return agentbridge.Event{}, errWaitTimeout
	}
	return agentbridge.Event{}, err
}

// errReplied ends the follow loop once the reply is found.
var errReplied = errors.New("replied")

// findEvent looks the awaited event up by id, from the thread's end
// backwards a page at a time, so the stream can start at it.
func (s *Server) findEvent(ctx context.Context, thread, id string) (agentbridge.Event, error) {
	var until int64
	for {
		events, err := s.c.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: -1, Tail: findPage, Until: until})
		if err != nil {
			return agentbridge.Event{}, err
		}
		for i := len(events) - 1; i >= 0; i-- {
			if events[i].ID == id {
				return events[i], nil
			}
		}
		if len(events) == 0 || events[0].Seq <= 1 {
			return agentbridge.Event{}, &agentbridge.Error{Code: agentbridge.ECodeEventNotFound, Field: "event_id",
				Message: fmt.Sprintf("There is no event %q in thread %q; use an id that read_thread or post showed.", id, thread)}
		}
		until = events[0].Seq - 1
	}
}

// reportProgress sends a progress notification every progressEvery until
// ctx ends. Notifications are best effort: a failed one is only logged.
func (s *Server) reportProgress(ctx context.Context, ss *mcp.ServerSession, tok any, start time.Time, timeout time.Duration) {
	t := time.NewTicker(progressEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			waited := time.Since(start)
			err := ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: tok,
				Progress:      waited.Seconds(),
				Total:         timeout.Seconds(),
				Message:       fmt.Sprintf("waiting for a reply (%ds of %ds)", int(waited.Seconds()), int(timeout.Seconds())),
			})
			if err != nil && ctx.Err() == nil {
				s.log.Debug("wait_for_reply: progress notification failed", "err", err)
			}
		}
	}
}
