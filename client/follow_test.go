package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testbridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// cutProxy is a reverse proxy on 127.0.0.1 in front of a real bridge that a
// test can use to break every open connection, or to refuse streams (as a
// proxy that buffers long responses would) while plain requests pass.
type cutProxy struct {
	srv *httptest.Server
	mu  sync.Mutex
	// cut ends the requests in flight; each request takes the current one.
	cut       context.CancelFunc
	gen       context.Context
	noStreams bool
	// streams counts the stream requests.
	streams atomic.Int64
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{}
	p.gen, p.cut = context.WithCancel(context.Background())
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0) // the cuts are on purpose
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/stream") {
			p.streams.Add(1)
		}
		p.mu.Lock()
		gen, refuse := p.gen, p.noStreams && strings.HasSuffix(r.URL.Path, "/stream")
		p.mu.Unlock()
		if refuse {
			http.Error(w, "no streams here", http.StatusBadGateway)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(gen, cancel)
		defer stop()
		rp.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(func() {
		p.breakAll()
		p.srv.Close()
	})
	return p
}

// breakAll ends every request in flight through the proxy.
func (p *cutProxy) breakAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut()
	p.gen, p.cut = context.WithCancel(context.Background())
}

func (p *cutProxy) refuseStreams(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.noStreams = on
}

// collector is a Follow handler that records the events' cursors.
type collector struct {
	mu     sync.Mutex
	global bool
	seen   []int64
}

func (c *collector) handle(it client.Item) error {
	if it.Event == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pos := it.Event.Seq
	if c.global {
		pos = it.Event.GSeq
	}
	c.seen = append(c.seen, pos)
	return nil
}

func (c *collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// wantRun checks that the cursors seen are exactly from+1 … to, once each.
func (c *collector) wantRun(t *testing.T, from, to int64) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	want := make([]int64, 0, to-from)
	for p := from + 1; p <= to; p++ {
		want = append(want, p)
	}
	if fmt.Sprint(c.seen) != fmt.Sprint(want) {
		t.Errorf("followed %v, want %v: an event lost or repeated", c.seen, want)
	}
}

// follow runs Follow in the background and returns a function that stops
// it and returns its error.
func follow(c *client.Client, cursor int64, o client.FollowOptions) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Follow(ctx, cursor, o) }()
	return func() error {
		cancel()
		return <-done
	}
}

// TestFollowAcrossBrokenConnections follows a thread through a proxy that
// breaks every connection every few messages: each event arrives once, in
// order, none lost.
func TestFollowAcrossBrokenConnections(t *testing.T) {
	t.Parallel()
	base := testbridge.Start(t, "")
	direct := client.New(base)
	proxy := newCutProxy(t, base)
	ctx := t.Context()
	th, err := direct.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "cut"})
	if err != nil {
		t.Fatal(err)
	}
	var got collector
	stop := follow(client.New(proxy.srv.URL), 1, client.FollowOptions{
		Thread: th.ID, Handle: got.handle, Backoff: client.Backoff{Min: time.Millisecond, Max: 20 * time.Millisecond},
	})
	const n = 40
	for i := range n {
		if _, err := direct.Append(ctx, th.ID, msg("user", fmt.Sprintf("m%d", i)), ""); err != nil {
			t.Fatal(err)
		}
		if i%7 == 3 {
			proxy.breakAll()
		}
	}
	testutil.WaitFor(t, 30*time.Second, "every message followed", func() bool { return got.count() >= n })
	if err := stop(); err != nil {
		t.Errorf("Follow = %v after its context ended, want nil", err)
	}
	got.wantRun(t, 1, n+1)
	if s := proxy.streams.Load(); s < 2 {
		t.Errorf("%d stream connections: the cuts did not break any", s)
	}
}

// TestFollowPollsWhenStreamsFail follows the global log through a proxy
// that refuses streams: after PollAfter failed connections Follow
// long-polls, and still sees every event once.
func TestFollowPollsWhenStreamsFail(t *testing.T) {
	t.Parallel()
	base := testbridge.Start(t, "")
	direct := client.New(base)
	proxy := newCutProxy(t, base)
	proxy.refuseStreams(true)
	ctx := t.Context()
	th, err := direct.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "poll"})
	if err != nil {
		t.Fatal(err)
	}
	got := collector{global: true}
	stop := follow(client.New(proxy.srv.URL), 0, client.FollowOptions{
		Handle: got.handle, PollAfter: 2, Backoff: client.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond},
	})
	defer stop()
	for i := range 5 {
		if _, err := direct.Append(ctx, th.ID, msg("user", fmt.Sprintf("m%d", i)), ""); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 30*time.Second, "the thread's events by long-poll", func() bool { return got.count() >= 6 })
	got.wantRun(t, 0, 6)
}

// TestFollowEnds checks how Follow stops: with Handle's error, with the
// bridge's refusal, and past a cursor_ahead when CursorAhead moves the
// cursor back.
func TestFollowEnds(t *testing.T) {
	t.Parallel()
	c := startBridge(t, "")
	ctx := t.Context()
	th, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "ends"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, th.ID, msg("user", "one"), ""); err != nil {
		t.Fatal(err)
	}

	errStop := errors.New("seen enough")
	err = c.Follow(ctx, 0, client.FollowOptions{Thread: th.ID, Handle: func(client.Item) error { return errStop }})
	if !errors.Is(err, errStop) {
		t.Errorf("Follow with a failing Handle = %v, want its error", err)
	}

	err = c.Follow(ctx, 0, client.FollowOptions{Thread: "no-such-thread", Handle: func(client.Item) error { return nil }})
	wantCode(t, err, agentbridge.ECodeThreadNotFound)

	var heads []int64
	var got collector
	stop := follow(c, 99, client.FollowOptions{
		Thread: th.ID, Handle: got.handle,
		CursorAhead: func(head int64) (int64, error) { heads = append(heads, head); return head, nil },
	})
	testutil.WaitFor(t, 30*time.Second, "the follow to open", func() bool {
		if _, err := c.Append(ctx, th.ID, msg("user", "two"), ""); err != nil {
			t.Fatal(err)
		}
		return got.count() > 0
	})
	if err := stop(); err != nil {
		t.Errorf("Follow = %v", err)
	}
	if len(heads) != 1 || heads[0] < 2 {
		t.Fatalf("CursorAhead got heads %v, want one call with the thread's head", heads)
	}
	if got.seen[0] != heads[0]+1 {
		t.Errorf("after cursor_ahead at head %d the first event followed is seq %d, want the next one", heads[0], got.seen[0])
	}
}

// batcher is a Follow handler that stages events in Handle and commits
// them in Idle, failing the commit it is told to once.
type batcher struct {
	mu                sync.Mutex
	pending, accepted []int64
	batches           []int
	failAt            int // the non-empty commit that fails (1-based); 0 none
	commits           int
}

func (b *batcher) handle(it client.Item) error {
	if it.Event != nil {
		b.mu.Lock()
		b.pending = append(b.pending, it.Event.GSeq)
		b.mu.Unlock()
	}
	return nil
}

func (b *batcher) idle() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		return nil
	}
	b.commits++
	if b.commits == b.failAt {
		b.pending = nil
		return errors.New("commit failed")
	}
	b.accepted = append(b.accepted, b.pending...)
	b.batches = append(b.batches, len(b.pending))
	b.pending = nil
	return nil
}

func (b *batcher) snapshot() (accepted []int64, batches []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.accepted), slices.Clone(b.batches)
}

// TestFollowIdleCommitsBatches: with Idle, the events that arrived
// together are handed to Handle, then Idle once; a failed Idle has the
// batch handed again, after the events the last good Idle accepted. Each
// event is accepted once, in order.
func TestFollowIdleCommitsBatches(t *testing.T) {
	t.Parallel()
	c := startBridge(t, "")
	ctx := t.Context()
	th, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "batches"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if _, err := c.Append(ctx, th.ID, msg("user", fmt.Sprintf("m%d", i)), ""); err != nil {
			t.Fatal(err)
		}
	}
	b := &batcher{failAt: 1}
	stop := follow(c, 0, client.FollowOptions{
		Handle: b.handle, Idle: b.idle, Retry: func(error) bool { return true },
		Backoff: client.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond},
	})
	for i := range 5 {
		if _, err := c.Append(ctx, th.ID, msg("user", fmt.Sprintf("late %d", i)), ""); err != nil {
			t.Fatal(err)
		}
	}
	testutil.WaitFor(t, 30*time.Second, "every event accepted", func() bool {
		accepted, _ := b.snapshot()
		return len(accepted) >= n+6
	})
	if err := stop(); err != nil {
		t.Errorf("Follow = %v", err)
	}
	accepted, batches := b.snapshot()
	want := make([]int64, 0, n+6)
	for g := int64(1); g <= n+6; g++ {
		want = append(want, g)
	}
	if !slices.Equal(accepted, want) {
		t.Errorf("accepted %v, want %v: an event lost or repeated", accepted, want)
	}
	if slices.Max(batches) < 2 {
		t.Errorf("batches %v: the events that arrived together were not committed together", batches)
	}
}

// lineCounter counts the log records by level and message.
type lineCounter struct {
	mu    sync.Mutex
	lines map[string]int
}

func (l *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *lineCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines == nil {
		l.lines = map[string]int{}
	}
	l.lines[r.Level.String()+" "+r.Message]++
	return nil
}
func (l *lineCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lineCounter) WithGroup(string) slog.Handler      { return l }

func (l *lineCounter) count(line string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines[line]
}

// TestFollowLogsOutageEdges fails Handle on many connections in a row (a
// ledger that refuses writes): Follow logs one warning when it starts, one
// line when an event is accepted again, and the attempts between them only
// at debug level; the backoff does not restart on connections that opened
// but delivered nothing.
func TestFollowLogsOutageEdges(t *testing.T) {
	t.Parallel()
	c := startBridge(t, "")
	ctx := t.Context()
	th, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "outage"})
	if err != nil {
		t.Fatal(err)
	}
	var failing atomic.Bool
	failing.Store(true)
	var attempts atomic.Int64
	var got collector
	lines := &lineCounter{}
	stop := follow(c, 1, client.FollowOptions{
		Thread: th.ID,
		Handle: func(it client.Item) error {
			if it.Event != nil && failing.Load() {
				attempts.Add(1)
				return errors.New("disk full")
			}
			return got.handle(it)
		},
		Retry:   func(error) bool { return true },
		Backoff: client.Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond},
		Logger:  slog.New(lines),
	})
	if _, err := c.Append(ctx, th.ID, msg("user", "m"), ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "five refused attempts", func() bool { return attempts.Load() >= 5 })
	failing.Store(false)
	testutil.WaitFor(t, 30*time.Second, "the event accepted", func() bool { return got.count() >= 1 })
	if err := stop(); err != nil {
		t.Errorf("Follow = %v", err)
	}
	if n := lines.count("WARN bridge stream lost; reconnecting"); n != 1 {
		t.Errorf("%d warnings over %d refused attempts, want 1", n, attempts.Load())
	}
	if n := lines.count("DEBUG bridge stream lost; reconnecting"); n < 4 {
		t.Errorf("%d debug lines over %d refused attempts, want one per attempt after the first", n, attempts.Load())
	}
	if n := lines.count("INFO following the bridge again"); n != 1 {
		t.Errorf("%d lines at the end of the outage, want 1", n)
	}
}
