package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"sync"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// maxSSELine caps one SSE line and one message's data. An event body is at
// most the server's 1 MiB cap, but the server re-encodes it and JSON escaping
// can grow it several times (Go writes '<' as \u003c), so the cap leaves
// room for that while still bounding memory against a broken server.
const maxSSELine = 8 << 20

// Item is one message of a stream: an event, a presence change (global
// stream) or a receipt change. Exactly one of Event, Presence and Receipt
// is set.
type Item struct {
	// Event is set for data messages (the default SSE event type).
	Event *agentbridge.Event
	// Presence is set for "event: presence" messages, which are not
	// persisted and carry no id.
	Presence *agentbridge.Presence
	// Receipt is set for "event: receipt" messages: the new latest receipt
	// of one (event, participant) pair, with its Thread set. Receipts are
	// not events and carry no id.
	Receipt *agentbridge.Receipt
	// ID is the message's SSE id (the seq on a thread stream, the gseq on
	// the global stream) when it carried one: the cursor to resume from.
	ID string
}

// Stream is an open SSE stream. Next must be called from one goroutine at a
// time; Close may be called from any goroutine, and unblocks Next.
type Stream struct {
	ctx    context.Context
	cancel context.CancelFunc
	body   io.ReadCloser
	p      *sseParser

	closeOnce sync.Once
	closeErr  error
	mu        sync.Mutex
	closed    bool
}

// Stream opens a thread's event stream. after is the seq to resume after;
// after < 0 starts at the end of the thread (only events appended from now
// on). A cursor past the thread's head is a cursor_ahead error, returned
// here rather than from Next.
func (c *Client) Stream(ctx context.Context, thread string, after int64) (*Stream, error) {
	q := url.Values{}
	if after >= 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	return c.openStream(ctx, "open thread stream", threadPath(thread, "events", "stream"), q)
}

// StreamAll opens the global event stream of all threads, from gseq after
// (0 = from the start of the log); it also carries presence changes.
func (c *Client) StreamAll(ctx context.Context, after int64) (*Stream, error) {
	q := url.Values{"after": {strconv.FormatInt(max(after, 0), 10)}}
	return c.openStream(ctx, "open stream", "/events/stream", q)
}

func (c *Client) openStream(ctx context.Context, op, path string, q url.Values) (*Stream, error) {
	sctx, cancel := context.WithCancel(ctx)
	resp, err := c.send(sctx, request{
		op: op, method: http.MethodGet, path: path, query: q,
		header: http.Header{"Accept": {"text/event-stream"}, "Cache-Control": {"no-cache"}},
	})
	if err != nil {
		cancel()
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("%s: the server answered with content type %q, not an event stream", op, resp.Header.Get("Content-Type"))
	}
	return &Stream{ctx: ctx, cancel: cancel, body: resp.Body, p: newSSEParser(resp.Body)}, nil
}

// Next blocks until the next event, presence or receipt change. Keep-alive comments
// and messages of unknown event types are skipped. It returns io.EOF when
// the server ended the stream or after Close, the context's error when the
// context ended, and a wrapped error when the connection broke.
func (s *Stream) Next() (Item, error) {
	for {
		msg, err := s.p.next()
		if err != nil {
			return Item{}, s.readErr(err)
		}
		switch msg.event {
		case "", "message":
			var e agentbridge.Event
			if err := json.Unmarshal([]byte(msg.data), &e); err != nil {
				return Item{}, fmt.Errorf("read stream: decode event %q: %w", msg.id, err)
			}
			return Item{Event: &e, ID: msg.id}, nil
		case "presence":
			var p agentbridge.Presence
			if err := json.Unmarshal([]byte(msg.data), &p); err != nil {
				return Item{}, fmt.Errorf("read stream: decode presence: %w", err)
			}
			return Item{Presence: &p, ID: msg.id}, nil
		case "receipt":
			var r agentbridge.Receipt
			if err := json.Unmarshal([]byte(msg.data), &r); err != nil {
				return Item{}, fmt.Errorf("read stream: decode receipt: %w", err)
			}
			return Item{Receipt: &r, ID: msg.id}, nil
		}
	}
}

// OnIdle has fn called each time Next is about to wait for the server with
// nothing received left to read: a reader that batches its work (the
// coordinator commits the decisions of the events that arrived together
// in one transaction) finishes it there. An error from fn is returned by
// that Next, wrapped. Call it before Next.
func (s *Stream) OnIdle(fn func() error) { s.p.idle = fn }

// idleError is an error of the OnIdle function.
type idleError struct{ err error }

func (e *idleError) Error() string { return e.err.Error() }
func (e *idleError) Unwrap() error { return e.err }

func (s *Stream) readErr(err error) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return io.EOF
	case s.ctx.Err() != nil:
		return s.ctx.Err()
	case errors.Is(err, io.EOF):
		return io.EOF
	default:
		return fmt.Errorf("read stream: %w", err)
	}
}

// Close ends the stream and releases its connection. It is safe to call
// more than once and concurrently with Next.
func (s *Stream) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.closeErr = s.body.Close()
	})
	return s.closeErr
}

// sseMessage is one dispatched SSE message.
type sseMessage struct {
	event string
	data  string
	// id is the value of the message's own id field ("" when it had none).
	id string
}

// sseParser reads SSE messages as the HTML standard defines them: lines end
// in CRLF, LF or CR; a leading BOM is dropped; ":" starts a comment; one
// space after the field's colon is dropped; data lines join with LF; an
// empty line dispatches; a message with no data lines is not dispatched; an
// id containing NUL is ignored; an unfinished message at EOF is discarded.
type sseParser struct {
	r       *bufio.Reader
	line    []byte
	skipLF  bool
	started bool
	// idle, when set, is called before every read that waits for the
	// server because nothing is buffered (Stream.OnIdle).
	idle func() error
}

func newSSEParser(r io.Reader) *sseParser {
	return &sseParser{r: bufio.NewReaderSize(r, 64<<10)}
}

// readLine returns the next line without its terminator. The returned slice
// is valid until the next call.
func (p *sseParser) readLine() ([]byte, error) {
	p.line = p.line[:0]
	for {
		if p.r.Buffered() == 0 {
			if p.idle != nil {
				if err := p.idle(); err != nil {
					return nil, &idleError{err}
				}
			}
			if _, err := p.r.Peek(1); err != nil {
				return nil, err
			}
		}
		buf, _ := p.r.Peek(p.r.Buffered())
		if p.skipLF {
			p.skipLF = false
			if buf[0] == '\n' {
				_, _ = p.r.Discard(1)
				continue
			}
		}
		i := bytes.IndexAny(buf, "\r\n")
		n := i
		if i < 0 {
			n = len(buf)
		}
		if len(p.line)+n > maxSSELine {
			return nil, fmt.Errorf("an SSE line is longer than %d bytes", maxSSELine)
		}
		p.line = append(p.line, buf[:n]...)
		if i < 0 {
			_, _ = p.r.Discard(n)
			continue
		}
		p.skipLF = buf[i] == '\r'
		_, _ = p.r.Discard(i + 1)
		if !p.started {
			p.started = true
			p.line = bytes.TrimPrefix(p.line, []byte("\xEF\xBB\xBF"))
		}
		return p.line, nil
	}
}

// next returns the next dispatched message.
func (p *sseParser) next() (sseMessage, error) {
	var (
		msg     sseMessage
		data    []byte
		hasData bool
	)
	for {
		line, err := p.readLine()
		if err != nil {
			return sseMessage{}, err
		}
		if len(line) == 0 {
			if !hasData {
				msg, data = sseMessage{}, data[:0]
				continue
			}
			msg.data = string(data)
			return msg, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "event":
			msg.event = string(value)
		case "data":
			if len(data)+len(value)+1 > maxSSELine {
				return sseMessage{}, fmt.Errorf("an SSE message's data is longer than %d bytes", maxSSELine)
			}
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				msg.id = string(value)
			}
		}
	}
}
