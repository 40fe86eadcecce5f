package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

const waitTimeout = 10 * time.Second

// The shared suite's helpers, under the short names these tests use.
var (
	newThread  = storetest.NewThread
	msg        = storetest.Msg
	control    = storetest.Control
	mustAppend = storetest.MustAppend
	wantCode   = storetest.WantCode
	allEvents  = storetest.AllEvents
)

func openStore(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "data", "bridge.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// lockWriter takes SQLite's write lock from a second connection, so the
// store's writer blocks in BEGIN IMMEDIATE (busy_timeout) until release.
// Tests use it to queue requests behind a known batch.
func lockWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	db, err := sqlitex.Open(s.Path(), sqlitex.Options{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := tx.Commit(); err != nil {
			t.Error(err)
		}
		_ = db.Close()
	}
}

// enqueue hands a request to the writer directly, as Append does, and
// returns its reply channel.
func enqueue(ctx context.Context, s *Store, thread string, in agentbridge.EventInput) chan response {
	r := &request{ctx: ctx, append: agentbridge.AppendRequest{Thread: thread, Input: in}, reply: make(chan response, 1)}
	ctl, err := r.append.Validate()
	if err != nil {
		panic(err)
	}
	r.control = ctl
	meta, err := storecore.StoredMeta(&r.append.Input.Meta)
	if err != nil {
		panic(err)
	}
	r.meta = meta
	s.reqs <- r
	return r.reply
}

// batchInput is one request of a batch test and the error code it must
// get ("" for success).
type batchInput struct {
	thread string
	in     agentbridge.EventInput
	code   string
}

// sendBatch queues inputs while the writer is held in BEGIN (the first is
// taken, the rest wait behind it), releases it, and checks each answer: the
// expected code, or the next seq of the thread starting at firstSeq, so a
// refused neighbour leaving a gap fails. It returns the seq after the last.
func sendBatch(ctx context.Context, t *testing.T, s *Store, inputs []batchInput, release func(), firstSeq int64) int64 {
	t.Helper()
	replies := []chan response{enqueue(ctx, s, inputs[0].thread, inputs[0].in)}
	testutil.WaitFor(t, waitTimeout, "the writer to take the first request", func() bool { return len(s.reqs) == 0 })
	for _, in := range inputs[1:] {
		replies = append(replies, enqueue(ctx, s, in.thread, in.in))
	}
	release()
	seq := firstSeq
	for i, ch := range replies {
		resp := <-ch
		if inputs[i].code != "" {
			wantCode(t, resp.err, inputs[i].code)
			continue
		}
		if resp.err != nil {
			t.Fatalf("request %d: %v", i, resp.err)
		}
		if resp.event.Seq != seq {
			t.Fatalf("request %d got seq %d, want %d: a refused neighbour left a gap", i, resp.event.Seq, seq)
		}
		seq++
	}
	return seq
}

func TestGroupCommitBatchesAndIsolatesFailures(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	newThread(t, s, "t")
	other := mustAppend(t, s, newThread(t, s, "other").ID, msg("user", "elsewhere"))
	before := s.Stats()

	release := lockWriter(t, s)
	// The writer takes the first request and blocks in BEGIN; the rest
	// queue behind it and are committed in at most one more batch. Good
	// and bad requests alternate, so whatever the split, a bad one shares
	// a transaction with good ones.
	inputs := []batchInput{
		{"t", msg("user", "one"), ""},
		{"t", agentbridge.EventInput{From: "user", Content: json.RawMessage(`"bad reply"`), Meta: agentbridge.Meta{ReplyTo: other.ID}}, agentbridge.ECodeUnknownReplyTo},
		{"t", msg("user", "two"), ""},
		{"nope", msg("user", "no thread"), agentbridge.ECodeThreadNotFound},
		{"t", msg("user", "three"), ""},
		{"t", msg("user", "four"), ""},
	}
	sendBatch(ctx, t, s, inputs, release, 2)
	after := s.Stats()
	if got := after.Batches - before.Batches; got > 2 {
		t.Errorf("%d requests took %d commits, want at most 2", len(inputs), got)
	}
	if after.MaxBatchSeen < 3 {
		t.Errorf("largest batch = %d, want at least 3", after.MaxBatchSeen)
	}
	if after.Appends-before.Appends != 4 || after.Rejected-before.Rejected != 2 {
		t.Errorf("stats delta: appends %d rejected %d, want 4 and 2", after.Appends-before.Appends, after.Rejected-before.Rejected)
	}
	if n := len(allEvents(t, s, "t")); n != 5 {
		t.Errorf("thread t has %d events, want 5 (created + 4 messages)", n)
	}
}

func TestCancelledBeforeTakenIsDropped(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	newThread(t, s, "t")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Append(cctx, agentbridge.AppendRequest{Thread: "t", Input: msg("user", "never")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("append with a cancelled ctx: err = %v, want context.Canceled", err)
	}

	release := lockWriter(t, s)
	first := enqueue(ctx, s, "t", msg("user", "kept"))
	testutil.WaitFor(t, waitTimeout, "the writer to take the first request", func() bool { return len(s.reqs) == 0 })
	// The caller gives up while its request waits in the queue. It is
	// cancelled before it is queued because the writer may still be
	// gathering (not yet blocked in BEGIN) when the queue looks empty: a
	// request it takes before the cancellation is rightly committed, and
	// cancelling after enqueue made this test fail about 1 run in 150.
	cctx, cancel = context.WithCancel(ctx)
	cancel()
	queued := enqueue(cctx, s, "t", msg("user", "dropped"))
	release()
	if resp := <-first; resp.err != nil {
		t.Fatal(resp.err)
	}
	if resp := <-queued; !errors.Is(resp.err, context.Canceled) {
		t.Fatalf("cancelled queued request: err = %v, want context.Canceled", resp.err)
	}
	if evs := allEvents(t, s, "t"); len(evs) != 2 || evs[1].Text() != "kept" {
		t.Fatalf("thread holds %d events, want created + kept", len(evs))
	}
}

func TestNotifyWakesAfterCommit(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	newThread(t, s, "t")

	ch := s.Notify()
	release := lockWriter(t, s)
	reply := enqueue(ctx, s, "t", msg("user", "hello"))
	testutil.WaitFor(t, waitTimeout, "the writer to take the request", func() bool { return len(s.reqs) == 0 })
	select {
	case <-ch:
		t.Fatal("Notify fired before the commit")
	default:
	}
	release()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatal("Notify did not fire after the commit")
	}
	// Whoever wakes must find the event.
	if evs := allEvents(t, s, "t"); len(evs) != 2 {
		t.Fatalf("after wake-up the thread has %d events, want 2", len(evs))
	}
	if resp := <-reply; resp.err != nil {
		t.Fatal(resp.err)
	}
	if s.Notify() == ch {
		t.Fatal("Notify returned the closed channel again")
	}
}

// TestKill9LosesNoAcknowledgedEvent runs a store in a child process (this
// test binary in helper mode) that appends in a loop and prints each
// acknowledged event's id, kills it with SIGKILL mid-stream, and checks
// that every acknowledged event is in the reopened file.
func TestKill9LosesNoAcknowledgedEvent(t *testing.T) {
	if os.Getenv("SQLITE_STORE_HELPER") != "" {
		return
	}
	path := filepath.Join(t.TempDir(), "bridge.db")
	cmd, out := testutil.StartSelf(t, "TestKill9Helper", "SQLITE_STORE_HELPER="+path)
	var acked []string
	sc := bufio.NewScanner(out)
	for sc.Scan() && len(acked) < 300 {
		acked = append(acked, sc.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(acked) < 300 {
		t.Fatalf("helper acknowledged only %d events before exiting", len(acked))
	}

	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs := allEvents(t, s, "t")
	stored := make(map[string]bool, len(evs))
	for _, ev := range evs {
		stored[ev.ID] = true
	}
	for _, id := range acked {
		if !stored[id] {
			t.Fatalf("acknowledged event %s lost after kill -9", id)
		}
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("seq gap after kill -9 at %d", i)
		}
	}
}

// TestKill9Helper is the child of TestKill9LosesNoAcknowledgedEvent; it
// does nothing unless SQLITE_STORE_HELPER names a database. Its loop is
// bounded, so an orphaned helper stops by itself.
func TestKill9Helper(t *testing.T) {
	path := os.Getenv("SQLITE_STORE_HELPER")
	if path == "" {
		return
	}
	ctx := context.Background()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	newThread(t, s, "t")
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: msg("user", fmt.Sprintf("w%d-%d", w, i))})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				fmt.Println(res.Event.ID)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// checkConsistent fails unless thread's stored row, current state and
// events agree: seqs 1..n without gaps, last_seq and event_count n,
// updated_at the last event's ts, ts strictly increasing, and the state
// what folding every event from scratch gives.
func checkConsistent(t *testing.T, s *Store, thread string) []agentbridge.Event {
	t.Helper()
	ctx := context.Background()
	evs := allEvents(t, s, thread)
	var want agentbridge.ThreadState
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("thread %s: event %d has seq %d, want %d", thread, i, ev.Seq, i+1)
		}
		if i > 0 && ev.TS <= evs[i-1].TS {
			t.Fatalf("thread %s: ts %s at seq %d does not increase past %s", thread, ev.TS, ev.Seq, evs[i-1].TS)
		}
		want = agentbridge.Fold(want, ev, agentbridge.DefaultHumans)
	}
	th, err := s.Thread(ctx, thread)
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(evs))
	if th.LastSeq != n || th.EventCount != n || th.UpdatedAt != evs[n-1].TS {
		t.Fatalf("thread %s row = last_seq %d, event_count %d, updated_at %s; events say %d, %d, %s",
			thread, th.LastSeq, th.EventCount, th.UpdatedAt, n, n, evs[n-1].TS)
	}
	st, seq, err := s.State(ctx, thread, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(st)
	wantJSON, _ := json.Marshal(want.Normalize())
	if seq != n || string(got) != string(wantJSON) {
		t.Fatalf("thread %s state at %d = %s; folding the events gives %s at %d", thread, seq, got, wantJSON, n)
	}
	return evs
}

// The writer caches each thread's head; refusals inside a batch — including
// ones that depend on a control earlier in the same batch — must leave the
// cached head exactly as the database has it.
func TestRefusalsMidBatchKeepCacheRight(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	newThread(t, s, "t")
	mustAppend(t, s, "t", msg("user", "warm the cache"))
	other := mustAppend(t, s, newThread(t, s, "other").ID, msg("user", "elsewhere"))

	release := lockWriter(t, s)
	inputs := []batchInput{
		{"t", msg("user", "first"), ""},
		{"t", control("user", `{"mute":{"targets":["codex"]}}`), ""},
		{"t", msg("codex", "muted, refused"), agentbridge.ECodeParticipantMuted},
		{"t", agentbridge.EventInput{From: "user", Content: json.RawMessage(`"bad"`), Meta: agentbridge.Meta{ReplyTo: other.ID}}, agentbridge.ECodeUnknownReplyTo},
		{"t", control("user", `{"pause":{"on":true}}`), ""},
		{"t", msg("claude", "paused, refused"), agentbridge.ECodeThreadPaused},
		{"t", control("user", `{"unmute":{"targets":["codex"]}}`), ""},
		{"t", control("user", `{"pause":{"on":false}}`), ""},
		{"t", msg("codex", "accepted again"), ""},
	}
	seq := sendBatch(ctx, t, s, inputs, release, 3)
	if ev := mustAppend(t, s, "t", msg("claude", "after the batch")); ev.Seq != seq {
		t.Fatalf("next append got seq %d, want %d", ev.Seq, seq)
	}
	checkConsistent(t, s, "t")
}

// A batch that fails in the database (here a trigger raising on one
// event's insert) stores nothing, answers every request in it with the
// error and leaves the cache as the database has it: the next appends get
// gapless seqs, the controls of the failed batch are not in the state, and
// a thread created in it does not exist.
func TestFailedBatchLeavesCacheRight(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	newThread(t, s, "t")
	mustAppend(t, s, "t", msg("user", "warm the cache"))

	db, err := sqlitex.Open(s.Path(), sqlitex.Options{MaxOpen: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE TRIGGER boom BEFORE INSERT ON events WHEN NEW.content = '"boom"'
		BEGIN SELECT RAISE(ABORT, 'injected failure'); END`); err != nil {
		t.Fatal(err)
	}

	release := lockWriter(t, s)
	first := enqueue(ctx, s, "t", msg("user", "before"))
	// The rest queue behind the first and share its batch or the next;
	// either way "boom" takes some neighbours down with it.
	testutil.WaitFor(t, waitTimeout, "the writer to take the first request", func() bool { return len(s.reqs) == 0 })
	replies := []chan response{first}
	for _, in := range []agentbridge.EventInput{
		msg("user", "ok one"),
		control("user", `{"pause":{"on":true}}`),
		msg("user", "boom"),
		msg("user", "ok two"),
	} {
		replies = append(replies, enqueue(ctx, s, "t", in))
	}
	created := &request{ctx: ctx, create: &agentbridge.CreateThreadRequest{ID: "u", Name: "u", From: "user"}, reply: make(chan response, 1)}
	s.reqs <- created
	replies = append(replies, created.reply)
	release()

	var failed int
	for i, ch := range replies {
		if resp := <-ch; resp.err != nil {
			if !strings.Contains(resp.err.Error(), "injected failure") {
				t.Fatalf("request %d: err = %v, want the injected failure", i, resp.err)
			}
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no request failed; the trigger did not fire")
	}
	if _, err := db.Exec(`DROP TRIGGER boom`); err != nil {
		t.Fatal(err)
	}

	evs := checkConsistent(t, s, "t")
	// The writer must judge the next append by the stored state, not by a
	// pause it cached from the failed batch.
	st, _, err := s.State(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: msg("codex", "an agent")})
	if st.Paused {
		wantCode(t, err, agentbridge.ECodeThreadPaused)
	} else if err != nil {
		t.Fatalf("agent message after the failed batch (the pause was not stored): %v", err)
	}
	next := mustAppend(t, s, "t", msg("user", "a human"))
	want := evs[len(evs)-1].Seq + 2
	if st.Paused {
		want--
	}
	if next.Seq != want {
		t.Fatalf("append after the failed batch got seq %d, want %d", next.Seq, want)
	}
	checkConsistent(t, s, "t")
	if _, err := s.Thread(ctx, "u"); err == nil {
		// The create was committed in an earlier batch than the failure.
		checkConsistent(t, s, "u")
	} else {
		wantCode(t, err, agentbridge.ECodeThreadNotFound)
		newThread(t, s, "u")
		checkConsistent(t, s, "u")
	}
	checkTail(t, s)
}

// Many callers appending messages and controls to a few threads at once;
// afterwards every thread is consistent, and a reopened store (empty cache,
// everything read back from the file) continues each thread gaplessly.
func TestCacheAgreesWithDatabaseUnderConcurrency(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bridge.db")
	ctx := context.Background()
	s, err := Open(ctx, path, Options{MaxBatch: 16})
	if err != nil {
		t.Fatal(err)
	}
	threads := []string{"a", "b", "c"}
	for _, th := range threads {
		newThread(t, s, th)
	}
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				th := threads[(w+i)%len(threads)]
				in := msg("codex", fmt.Sprintf("w%d i%d", w, i))
				switch i % 10 {
				case 3:
					in = control("user", `{"mute":{"targets":["codex"],"mode":"soft"}}`)
				case 6:
					in = control("user", `{"unmute":{"targets":["codex"]}}`)
				case 8:
					in = agentbridge.EventInput{Type: agentbridge.TypeThreadRenamed, From: "user", Content: json.RawMessage(fmt.Sprintf(`"name %d"`, w))}
				}
				if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: in}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	last := map[string]agentbridge.Event{}
	for _, th := range threads {
		evs := checkConsistent(t, s, th)
		last[th] = evs[len(evs)-1]
		got, err := s.Thread(ctx, th)
		if err != nil {
			t.Fatal(err)
		}
		want := "thread " + th
		for _, e := range evs {
			if e.Type == agentbridge.TypeThreadRenamed {
				want = e.Text()
			}
		}
		if got.Name != want {
			t.Errorf("thread %s name %q, want %q", th, got.Name, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	for _, th := range threads {
		ev := mustAppend(t, s, th, msg("user", "after reopen"))
		if ev.Seq != last[th].Seq+1 || ev.TS <= last[th].TS {
			t.Fatalf("thread %s after reopen: seq %d ts %s, want seq %d and ts after %s", th, ev.Seq, ev.TS, last[th].Seq+1, last[th].TS)
		}
		checkConsistent(t, s, th)
	}
}

// The writer leaves checkpoints to a background goroutine (its own
// autocheckpoint is only a far-off backstop): under a steady stream of
// commits the database file must still receive the pages, and the WAL must
// keep being reused from the start rather than grow with the log.
func TestBackgroundCheckpointKeepsWALBounded(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	threads := []string{"a", "b", "c", "d"}
	for _, th := range threads {
		newThread(t, s, th)
	}
	dbSize := func() int64 {
		fi, err := os.Stat(s.Path())
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	start := dbSize()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: threads[(w+i)%len(threads)], Input: msg("user", strings.Repeat("x", 200))}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	testutil.WaitFor(t, waitTimeout, "checkpoints to copy pages into the database file", func() bool { return dbSize() > start })
	wal, err := os.Stat(s.Path() + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// ~900 commits of ~12 pages: a WAL that was never restarted would hold
	// them all (~45 MB); restarted, it stays near writerCheckpointPages.
	t.Logf("db %d bytes, wal %d bytes, %+v", dbSize(), wal.Size(), s.Stats())
	if limit := int64(writerCheckpointPages*4096) * 3 / 2; wal.Size() > limit {
		t.Fatalf("WAL is %d bytes, want at most %d: it is not being restarted", wal.Size(), limit)
	}
}

// TestQueuedDuringBeginJoinsTheBatch checks that requests queued while the
// writer waits in BEGIN are committed with the request it was beginning
// for, in one commit, and that one cancelled meanwhile is dropped.
func TestQueuedDuringBeginJoinsTheBatch(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	newThread(t, s, "t")
	before := s.Stats()

	release := lockWriter(t, s)
	replies := []chan response{enqueue(ctx, s, "t", msg("user", "first"))}
	testutil.WaitFor(t, waitTimeout, "the writer to take the first request", func() bool { return len(s.reqs) == 0 })
	for i := range 5 {
		replies = append(replies, enqueue(ctx, s, "t", msg("user", fmt.Sprint("queued ", i))))
	}
	cancelled, cancel := context.WithCancel(ctx)
	dropped := enqueue(cancelled, s, "t", msg("user", "cancelled"))
	cancel()
	release()

	for i, ch := range replies {
		if resp := <-ch; resp.err != nil || resp.event.Seq != int64(i+2) {
			t.Fatalf("request %d: seq %d, %v; want seq %d", i, resp.event.Seq, resp.err, i+2)
		}
	}
	if resp := <-dropped; !errors.Is(resp.err, context.Canceled) {
		t.Errorf("cancelled request: %v, want context.Canceled", resp.err)
	}
	after := s.Stats()
	if got := after.Batches - before.Batches; got != 1 {
		t.Errorf("%d requests took %d commits, want 1", len(replies), got)
	}
	if n := len(allEvents(t, s, "t")); n != 7 {
		t.Errorf("thread t has %d events, want 7 (created + 6 messages)", n)
	}
}

// TestGather checks the writer's wait for a commit's worth of requests: a
// lone client's request is committed without waiting, queued requests all
// join, a submitter that makes the queue long enough wakes the writer, the
// wait ends at the deadline when too few come, and Close ends it at once.
func TestGather(t *testing.T) {
	newStore := func(last int, wait time.Duration) *Store {
		return &Store{reqs: make(chan *request, 8), max: 8, done: make(chan struct{}),
			gatherFull: make(chan struct{}, 1), w: writerState{lastBatch: last, gatherWait: wait}}
	}
	r := func() *request { return &request{} }

	s := newStore(1, groupWait)
	if got := s.gather([]*request{r()}); len(got) != 1 || s.w.gatherT != nil {
		t.Errorf("after a one-request commit: gathered %d, timer %v; want 1 and no wait", len(got), s.w.gatherT)
	}

	s = newStore(3, groupWait)
	for range 3 {
		s.reqs <- r()
	}
	if got := s.gather([]*request{r()}); len(got) != 4 || len(s.reqs) != 0 {
		t.Errorf("gathered %d with %d left queued; want all 4", len(got), len(s.reqs))
	}

	// The deadline is far away: only the submitters' signal can end the
	// wait in time. The submitter takes the store as an argument, not the
	// variable s, because it may still be in queued after gather returns,
	// when the next case has already reassigned s.
	s = newStore(3, time.Minute)
	submitted := make(chan struct{})
	go func(s *Store) {
		defer close(submitted)
		for range 2 {
			s.reqs <- r()
			s.queued()
		}
	}(s)
	start := time.Now()
	if got := s.gather([]*request{r()}); len(got) != 3 || time.Since(start) > 30*time.Second {
		t.Errorf("gathered %d after %v; want 3, woken by the second submitter", len(got), time.Since(start))
	}
	<-submitted

	s = newStore(4, groupWait)
	s.reqs <- r()
	start = time.Now()
	got := s.gather([]*request{r()})
	if len(got) != 2 || time.Since(start) < groupWait {
		t.Errorf("gathered %d after %v; want 2 after at least %v", len(got), time.Since(start), groupWait)
	}

	s = newStore(4, time.Minute)
	close(s.done)
	if got := s.gather([]*request{r()}); len(got) != 1 {
		t.Errorf("after Close: gathered %d, want 1", len(got))
	}
}

// checkTail checks the store's tail against the database: it covers the
// log's last event, and from the oldest cursor it answers it gives exactly
// the events (every field, as JSON) a query gives.
func checkTail(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	var db []agentbridge.Event
	for after := int64(0); ; {
		page, err := s.Events(ctx, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		db = append(db, page...)
		after = page[len(page)-1].GSeq
	}
	head, ok := s.Tail().Head()
	if !ok || len(db) == 0 || head != db[len(db)-1].GSeq {
		t.Fatalf("tail head = %d, %v; the log ends at %d events", head, ok, len(db))
	}
	for i, e := range db {
		after := e.GSeq - 1
		got, through, ok := s.Tail().Since(after, 0, nil)
		if !ok {
			continue
		}
		want, _ := json.Marshal(db[i:])
		have, _ := json.Marshal(got)
		if string(have) != string(want) || through != head {
			t.Fatalf("tail after %d through %d:\n%s\nthe database:\n%s", after, through, have, want)
		}
		return
	}
	t.Fatal("the tail covers none of the log")
}

// The tail holds what the database holds, field for field, for every kind
// of event, once appends, refusals, replays and thread creations have gone
// through the writer at once.
func TestTailAgreesWithDatabase(t *testing.T) {
	s := openStore(t, Options{MaxBatch: 16})
	ctx := context.Background()
	newThread(t, s, "a")
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 30 {
				var err error
				switch i % 6 {
				case 0:
					_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "a", Input: msg("user", fmt.Sprintf("i%d", i)), IdempotencyKey: fmt.Sprintf("k%d", i)})
				case 1:
					in := msg("codex", "with meta")
					in.To = "user"
					in.Meta = agentbridge.Meta{Tags: []string{"x"}, Via: "coordinator", Extra: map[string]json.RawMessage{"note": json.RawMessage(`{"b":1,"a":[true]}`)}}
					_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "a", Input: in})
				case 2:
					_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "a", Input: control("user", `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m"}}}`)})
				case 3:
					_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "nope", Input: msg("user", "refused")})
					if agentbridge.ErrorCode(err) == agentbridge.ECodeThreadNotFound {
						err = nil
					}
				case 4:
					_, _, err = s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: fmt.Sprintf("t%d-%d", w, i), Name: "n", From: "user"})
				case 5:
					_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "a", Input: agentbridge.EventInput{Type: agentbridge.TypeThreadRenamed, From: "user", Content: json.RawMessage(`"renamed"`)}})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	checkTail(t, s)
}

// Events another writer commits to the same file (a second process) never
// reach this store's tail: its next batch does not follow its last event,
// so the tail no longer answers for cursors before that batch and the
// streams read those from the database, the other writer's event with them.
func TestTailLeavesOtherWritersToTheDatabase(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	newThread(t, s, "a")
	before := mustAppend(t, s, "a", msg("user", "one")).GSeq
	other, err := Open(ctx, s.Path(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	newThread(t, other, "x")
	foreign := mustAppend(t, other, "x", msg("user", "from the other writer"))
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, s, "a", msg("user", "two"))
	if got, _, ok := s.Tail().Since(before, 0, nil); ok {
		t.Fatalf("tail answered after %d with %d events, missing the other writer's", before, len(got))
	}
	evs, err := s.Events(ctx, before, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs, func(e agentbridge.Event) bool { return e.ID == foreign.ID }) {
		t.Fatalf("the database lacks the other writer's event %s", foreign.ID)
	}
	checkTail(t, s)
}

// TestOrphanChunksSwept: the chunks an upload cut short left, with no
// row, are removed by the next sweep, but not those of an upload this
// store is still writing.
func TestOrphanChunksSwept(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	newThread(t, s, "t")
	data := bytes.Repeat([]byte("x"), 3<<20)
	a := storetest.NewAttachment(data, "cut.bin", "application/octet-stream")
	if _, err := s.PutAttachment(ctx, "t", a, io.MultiReader(bytes.NewReader(data[:2<<20]), iotest.ErrReader(errors.New("cut"))), time.Now()); err == nil {
		t.Fatal("an upload cut short was stored")
	}
	chunks := func() (n int) {
		t.Helper()
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM attachment_chunks WHERE attachment = ?`, a.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := chunks(); n != 2 {
		t.Fatalf("%d chunks left by the cut upload, want 2", n)
	}
	s.uploads.add(a.ID)
	if _, err := s.SweepAttachments(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := chunks(); n != 2 {
		t.Errorf("the sweep removed the chunks of an upload being written: %d left", n)
	}
	s.uploads.done(a.ID)
	if _, err := s.SweepAttachments(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if n := chunks(); n != 0 {
		t.Errorf("%d chunks of the cut upload left after the sweep", n)
	}
}
