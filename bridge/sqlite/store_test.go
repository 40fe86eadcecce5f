package sqlite

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

const waitTimeout = 10 * time.Second

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

func newThread(t testing.TB, s *Store, id string) agentbridge.Thread {
	t.Helper()
	th, _, err := s.CreateThread(context.Background(), agentbridge.CreateThreadRequest{ID: id, Name: "thread " + id})
	if err != nil {
		t.Fatal(err)
	}
	return th
}

func msg(from, text string) agentbridge.EventInput {
	b, _ := json.Marshal(text)
	return agentbridge.EventInput{From: from, Content: b}
}

func control(from, content string) agentbridge.EventInput {
	return agentbridge.EventInput{Type: agentbridge.TypeControl, From: from, Content: json.RawMessage(content)}
}

func mustAppend(t testing.TB, s *Store, thread string, in agentbridge.EventInput) agentbridge.Event {
	t.Helper()
	res, err := s.Append(context.Background(), agentbridge.AppendRequest{Thread: thread, Input: in})
	if err != nil {
		t.Fatalf("append to %s: %v", thread, err)
	}
	return res.Event
}

// wantCode fails unless err is an *agentbridge.Error with the code.
func wantCode(t *testing.T, err error, code string) *agentbridge.Error {
	t.Helper()
	var e *agentbridge.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
	if e.Message == "" {
		t.Fatalf("error %s has no message", code)
	}
	return e
}

func allEvents(t testing.TB, s *Store, thread string) []agentbridge.Event {
	t.Helper()
	evs, err := s.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	return evs
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
	r := &request{ctx: ctx, append: &agentbridge.AppendRequest{Thread: thread, Input: in}, reply: make(chan response, 1)}
	if err := r.append.Input.Validate(); err != nil {
		panic(err)
	}
	s.reqs <- r
	return r.reply
}

func TestConcurrentAppendsAreOrdered(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	threads := []string{"a", "b", "c", "d"}
	for _, id := range threads {
		newThread(t, s, id)
	}
	const writers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				th := threads[(w+i)%len(threads)]
				if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: msg(fmt.Sprintf("agent%d", w), fmt.Sprintf("m%d", i))}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	total := 0
	for _, th := range threads {
		evs := allEvents(t, s, th)
		total += len(evs)
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("thread %s: event %d has seq %d: seq must be gapless from 1", th, i, ev.Seq)
			}
			if i > 0 && ev.TS <= evs[i-1].TS {
				t.Fatalf("thread %s: ts %s after %s: ts must strictly increase", th, ev.TS, evs[i-1].TS)
			}
		}
		info, err := s.Thread(ctx, th)
		if err != nil {
			t.Fatal(err)
		}
		if info.LastSeq != int64(len(evs)) || info.EventCount != int64(len(evs)) || info.UpdatedAt != evs[len(evs)-1].TS {
			t.Errorf("thread %s = %+v, want last_seq=event_count=%d updated_at=%s", th, info, len(evs), evs[len(evs)-1].TS)
		}
	}
	if want := len(threads) + writers*each; total != want {
		t.Fatalf("%d events stored, want %d", total, want)
	}
	global, err := s.Events(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(global) != total {
		t.Fatalf("global log has %d events, want %d", len(global), total)
	}
	ids := map[string]bool{}
	for i, ev := range global {
		if i > 0 && ev.GSeq <= global[i-1].GSeq {
			t.Fatalf("gseq %d after %d: must strictly increase", ev.GSeq, global[i-1].GSeq)
		}
		if ids[ev.ID] {
			t.Fatalf("duplicate id %s", ev.ID)
		}
		ids[ev.ID] = true
	}
	if head, _ := s.Head(ctx); head != global[len(global)-1].GSeq {
		t.Errorf("Head = %d, want %d", head, global[len(global)-1].GSeq)
	}
	st := s.Stats()
	if st.Appends != uint64(total) || st.Batches == 0 || st.Batches > st.Appends {
		t.Errorf("stats = %+v, want %d appends in at most as many batches", st, total)
	}
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
	inputs := []struct {
		thread string
		in     agentbridge.EventInput
		code   string
	}{
		{"t", msg("user", "one"), ""},
		{"t", agentbridge.EventInput{From: "user", Content: json.RawMessage(`"bad reply"`), Meta: agentbridge.Meta{ReplyTo: other.ID}}, agentbridge.ECodeUnknownReplyTo},
		{"t", msg("user", "two"), ""},
		{"nope", msg("user", "no thread"), agentbridge.ECodeThreadNotFound},
		{"t", msg("user", "three"), ""},
		{"t", msg("user", "four"), ""},
	}
	replies := []chan response{enqueue(ctx, s, inputs[0].thread, inputs[0].in)}
	testutil.WaitFor(t, waitTimeout, "the writer to take the first request", func() bool { return len(s.reqs) == 0 })
	for _, in := range inputs[1:] {
		replies = append(replies, enqueue(ctx, s, in.thread, in.in))
	}
	release()

	seq := int64(2)
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
	cctx, cancel = context.WithCancel(ctx)
	queued := enqueue(cctx, s, "t", msg("user", "dropped"))
	cancel()
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

func TestAppendErrors(t *testing.T) {
	s := openStore(t, Options{Humans: agentbridge.Humans{"user", "boss"}})
	ctx := context.Background()
	th := newThread(t, s, "t").ID
	otherEv := mustAppend(t, s, newThread(t, s, "u").ID, msg("user", "in u"))
	mustAppend(t, s, th, control("user", `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"gpt"}}}`))
	// A non-human's mute and pause do not count.
	mustAppend(t, s, th, control("codex", `{"mute":{"targets":["claude"]},"pause":{"on":true}}`))
	mustAppend(t, s, th, msg("claude", "still allowed"))
	stored := len(allEvents(t, s, th))

	appendErr := func(thread string, in agentbridge.EventInput) error {
		_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: thread, Input: in})
		return err
	}
	e := wantCode(t, appendErr("missing", msg("user", "x")), agentbridge.ECodeThreadNotFound)
	if e.Thread != "missing" {
		t.Errorf("thread_not_found names thread %q", e.Thread)
	}
	wantCode(t, appendErr("bad id!", msg("user", "x")), agentbridge.ECodeThreadNotFound)
	e = wantCode(t, appendErr(th, agentbridge.EventInput{From: "user", Content: json.RawMessage(`"x"`), Meta: agentbridge.Meta{ReplyTo: otherEv.ID}}), agentbridge.ECodeUnknownReplyTo)
	if e.Field != "meta.reply_to" {
		t.Errorf("unknown_reply_to field = %q", e.Field)
	}
	wantCode(t, appendErr(th, agentbridge.EventInput{From: "user", Content: json.RawMessage(`"x"`), Meta: agentbridge.Meta{ReplyTo: "01NOPE"}}), agentbridge.ECodeUnknownReplyTo)
	wantCode(t, appendErr(th, agentbridge.EventInput{From: "user"}), agentbridge.ECodeMissingField)
	if n := len(allEvents(t, s, th)); n != stored {
		t.Fatalf("refused appends stored something: %d events, want %d", n, stored)
	}

	mustAppend(t, s, th, control("boss", `{"mute":{"targets":["codex"],"mode":"hard"}}`))
	e = wantCode(t, appendErr(th, msg("codex", "let me speak")), agentbridge.ECodeParticipantMuted)
	if e.Thread != th || e.Participant != "codex" {
		t.Errorf("participant_muted names thread %q participant %q", e.Thread, e.Participant)
	}
	// Hard mute refuses messages only.
	mustAppend(t, s, th, agentbridge.EventInput{Type: "note", From: "codex", Content: json.RawMessage(`{"x":1}`)})

	mustAppend(t, s, th, control("user", `{"pause":{"on":true},"unmute":{"targets":["codex"]}}`))
	e = wantCode(t, appendErr(th, msg("codex", "hello?")), agentbridge.ECodeThreadPaused)
	if e.Thread != th || e.Participant != "codex" {
		t.Errorf("thread_paused names thread %q participant %q", e.Thread, e.Participant)
	}
	mustAppend(t, s, th, msg("boss", "humans may still talk"))
	mustAppend(t, s, th, control("codex", `{"invite":{"participant_id":"gemini","profile":{"client":"gemini","model":"g"}}}`))
	mustAppend(t, s, th, control("user", `{"pause":{"on":false}}`))
	mustAppend(t, s, th, msg("codex", "back"))

	if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: msg("user", "x"), IdempotencyKey: string(make([]byte, 300))}); err == nil {
		t.Error("a 300-byte idempotency key was accepted")
	}
	if n := s.Stats().Rejected; n != 5 {
		t.Errorf("Stats.Rejected = %d, want 5 (refusals inside the writer)", n)
	}
}

func TestCreateThread(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()

	th, ev, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if th.Name != "untitled" || len(th.ID) != 26 || th.LastSeq != 1 || th.EventCount != 1 || th.CreatedAt != ev.TS || th.UpdatedAt != ev.TS {
		t.Errorf("default thread = %+v", th)
	}
	if ev.Type != agentbridge.TypeThreadCreated || ev.From != "user" || ev.To != "all" || ev.Text() != "untitled" || ev.Seq != 1 {
		t.Errorf("thread.created event = %+v", ev)
	}
	got, err := s.Thread(ctx, th.ID)
	if err != nil || got != th {
		t.Errorf("Thread(%s) = %+v, %v; want %+v", th.ID, got, err, th)
	}

	th2, ev2, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "my-thread_1.x", Name: "Plans", From: "codex"})
	if err != nil {
		t.Fatal(err)
	}
	if th2.ID != "my-thread_1.x" || th2.Name != "Plans" || ev2.From != "codex" {
		t.Errorf("chosen thread = %+v, event %+v", th2, ev2)
	}
	e := wantCode(t, firstErr(s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "my-thread_1.x"})), agentbridge.ECodeThreadExists)
	if e.Thread != "my-thread_1.x" {
		t.Errorf("thread_exists names %q", e.Thread)
	}
	for _, req := range []agentbridge.CreateThreadRequest{{ID: "-bad"}, {ID: "has space"}, {ID: string(make([]byte, 65))}} {
		if e := wantCode(t, firstErr(s.CreateThread(ctx, req)), agentbridge.ECodeInvalidField); e.Field != "id" {
			t.Errorf("invalid id %q: field %q", req.ID, e.Field)
		}
	}
	if e := wantCode(t, firstErr(s.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "  "})), agentbridge.ECodeInvalidField); e.Field != "name" {
		t.Errorf("blank name: field %q", e.Field)
	}
	if e := wantCode(t, firstErr(s.CreateThread(ctx, agentbridge.CreateThreadRequest{From: "no spaces"})), agentbridge.ECodeInvalidField); e.Field != "from" {
		t.Errorf("bad from: field %q", e.Field)
	}
	if _, err := s.Thread(ctx, "nope"); agentbridge.ErrorCode(err) != agentbridge.ECodeThreadNotFound {
		t.Errorf("Thread(nope): %v", err)
	}

	ren := mustAppend(t, s, th2.ID, agentbridge.EventInput{Type: agentbridge.TypeThreadRenamed, From: "user", Content: json.RawMessage(`"Better plans"`)})
	got, _ = s.Thread(ctx, th2.ID)
	if got.Name != "Better plans" || got.UpdatedAt != ren.TS || got.LastSeq != 2 {
		t.Errorf("after rename: %+v", got)
	}
}

func firstErr(_ agentbridge.Thread, _ agentbridge.Event, err error) error { return err }

// TestKill9LosesNoAcknowledgedEvent runs a store in a child process (this
// test binary in helper mode) that appends in a loop and prints each
// acknowledged event's id, kills it with SIGKILL mid-stream, and checks
// that every acknowledged event is in the reopened file.
func TestKill9LosesNoAcknowledgedEvent(t *testing.T) {
	if os.Getenv("SQLITE_STORE_HELPER") != "" {
		return
	}
	path := filepath.Join(t.TempDir(), "bridge.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Helper$")
	cmd.Env = append(os.Environ(), "SQLITE_STORE_HELPER="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
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
	for _, id := range acked {
		if _, err := s.Event(context.Background(), id); err != nil {
			t.Fatalf("acknowledged event %s lost after kill -9: %v", id, err)
		}
	}
	evs := allEvents(t, s, "t")
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
