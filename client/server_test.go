package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testbridge"
)

// startBridge runs a real bridge on 127.0.0.1:0 over a temp SQLite file and
// returns a client of it.
func startBridge(t testing.TB, token string) *client.Client {
	t.Helper()
	return client.New(testbridge.Start(t, token), client.WithToken(token))
}

func msg(from, text string) agentbridge.EventInput {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(text)
	return agentbridge.EventInput{From: from, Content: bytes.TrimSpace(buf.Bytes())}
}

func wantCode(t *testing.T, err error, code string) *agentbridge.Error {
	t.Helper()
	var e *agentbridge.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("err = %v, want code %s", err, code)
	}
	return e
}

func TestAgainstServer(t *testing.T) {
	t.Parallel()
	c := startBridge(t, "tok")
	ctx := t.Context()

	if info, err := c.Ping(ctx); err != nil || info.Version == "" || !info.Humans.Has("user") {
		t.Fatalf("Ping = %+v, %v; want a version and the default human", info, err)
	}
	if _, err := client.New(c.URL()).Threads(ctx, "", 0); err == nil {
		t.Fatal("a client without the token was let in")
	} else {
		wantCode(t, err, agentbridge.ECodeUnauthorized)
	}

	th, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "t1", Name: "first"})
	if err != nil || th.ID != "t1" || th.Name != "first" {
		t.Fatalf("CreateThread = %+v, %v", th, err)
	}
	_, err = c.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "t1", Name: "again"})
	if e := wantCode(t, err, agentbridge.ECodeThreadExists); e.Status != 409 {
		t.Errorf("status = %d, want 409", e.Status)
	}
	if got, err := c.Thread(ctx, "t1"); err != nil || got.ID != "t1" || got.Name != "first" {
		t.Fatalf("Thread = %+v, %v", got, err)
	}
	_, err = c.Thread(ctx, "nope")
	wantCode(t, err, agentbridge.ECodeThreadNotFound)

	e1, err := c.Append(ctx, "t1", msg("user", "hello"), "k1")
	if err != nil || e1.Seq != 2 || e1.Text() != "hello" {
		t.Fatalf("Append = %+v, %v", e1, err)
	}
	again, err := c.Append(ctx, "t1", msg("user", "hello"), "k1")
	if err != nil || again.ID != e1.ID {
		t.Fatalf("idempotent retry = %+v, %v; want event %s", again, err, e1.ID)
	}
	_, err = c.Append(ctx, "t1", agentbridge.EventInput{From: "user"}, "")
	if e := wantCode(t, err, agentbridge.ECodeMissingField); e.Field != "content" || e.Message == "" {
		t.Errorf("missing content error = %+v", e)
	}

	ctl := agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user",
		Content: json.RawMessage(`{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m1"}}}`)}
	if _, err := c.Append(ctx, "t1", ctl, ""); err != nil {
		t.Fatal(err)
	}
	st, seq, err := c.State(ctx, "t1", 0)
	if err != nil || seq != 3 {
		t.Fatalf("State = seq %d, %v", seq, err)
	}
	if inv, ok := st.Invited("codex"); !ok || inv.Profile.Model != "m1" {
		t.Fatalf("state after invite = %+v", st)
	}
	if st, seq, err := c.State(ctx, "t1", 2); err != nil || seq != 2 || len(st.Participants.Invited) != 0 {
		t.Fatalf("State at 2 = %+v seq %d, %v", st, seq, err)
	}

	evs, err := c.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "t1", After: 1})
	if err != nil || len(evs) != 2 || evs[0].Seq != 2 {
		t.Fatalf("ThreadEvents after 1 = %d events, %v", len(evs), err)
	}
	evs, err = c.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "t1", After: -1, Tail: 1})
	if err != nil || len(evs) != 1 || evs[0].Seq != 3 {
		t.Fatalf("ThreadEvents tail 1 = %+v, %v", evs, err)
	}
	_, err = c.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: "t1", After: 99})
	if e := wantCode(t, err, agentbridge.ECodeCursorAhead); e.Head == nil || *e.Head != 3 {
		t.Errorf("cursor_ahead head = %v, want 3", e.Head)
	}

	threads, err := c.Threads(ctx, "", 10)
	if err != nil || len(threads) != 1 || threads[0].LastSeq != 3 {
		t.Fatalf("Threads = %+v, %v", threads, err)
	}

	if err := c.SetPresence(ctx, "t1", agentbridge.PresenceInput{From: "codex", State: "thinking"}); err != nil {
		t.Fatal(err)
	}
	ps, err := c.Presence(ctx, "t1")
	if err != nil || len(ps) != 1 || ps[0].ID != "codex" || ps[0].State != "thinking" {
		t.Fatalf("Presence = %+v, %v", ps, err)
	}
	err = c.SetPresence(ctx, "t1", agentbridge.PresenceInput{From: "codex", State: "asleep"})
	wantCode(t, err, agentbridge.ECodeInvalidField)

	head, err := c.Head(ctx)
	if err != nil || head != 3 {
		t.Fatalf("Head = %d, %v; want 3", head, err)
	}
}

func TestLongPoll(t *testing.T) {
	t.Parallel()
	c := startBridge(t, "")
	ctx := t.Context()
	if _, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	evs, next, err := c.Events(ctx, 0, 0, 0)
	if err != nil || len(evs) != 1 || next != 1 {
		t.Fatalf("Events = %d events next %d, %v", len(evs), next, err)
	}
	type result struct {
		evs  []agentbridge.Event
		next int64
		err  error
	}
	done := make(chan result, 1)
	go func() {
		evs, next, err := c.Events(ctx, 1, 0, 30*time.Second)
		done <- result{evs, next, err}
	}()
	// The poll may not have reached the server yet when we append; either
	// way it must return the new event.
	if _, err := c.Append(ctx, "t", msg("user", "wake"), ""); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || len(r.evs) != 1 || r.evs[0].Text() != "wake" || r.next != 2 {
		t.Fatalf("long poll = %+v", r)
	}
	if evs, next, err := c.Events(ctx, 2, 0, time.Second); err != nil || len(evs) != 0 || next != 2 {
		t.Fatalf("empty long poll = %d events next %d, %v; want none and the same cursor", len(evs), next, err)
	}
	_, _, err = c.Events(ctx, 50, 0, 0)
	wantCode(t, err, agentbridge.ECodeCursorAhead)

	cctx, cancel := context.WithCancel(ctx)
	go cancel()
	if _, _, err := c.Events(cctx, 2, 0, 30*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled long poll = %v, want context.Canceled", err)
	}
}

func TestStreamsAgainstServer(t *testing.T) {
	t.Parallel()
	c := startBridge(t, "")
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		if _, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Append(ctx, "a", msg("user", "one"), ""); err != nil {
		t.Fatal(err)
	}

	// Per-thread from a cursor: history first, then live events, ids = seq.
	s, err := c.Stream(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := c.StreamAll(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	big := strings.Repeat("<&>\n", 200<<10) // 800 KiB that JSON escaping grows a lot
	if _, err := c.Append(ctx, "a", msg("codex", big), ""); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"one", big} {
		it, err := s.Next()
		if err != nil || it.Event == nil || it.Event.Text() != want || it.ID != []string{"2", "3"}[i] {
			t.Fatalf("thread item %d: id %q, err %v", i, it.ID, err)
		}
	}

	// Global: every event of both threads in gseq order, presence as its
	// own item.
	if err := c.SetPresence(ctx, "b", agentbridge.PresenceInput{From: "codex", State: "typing"}); err != nil {
		t.Fatal(err)
	}
	var gseqs []int64
	var sawPresence bool
	for len(gseqs) < 4 || !sawPresence {
		it, err := all.Next()
		if err != nil {
			t.Fatal(err)
		}
		if it.Presence != nil {
			sawPresence = it.Presence.Thread == "b" && it.Presence.State == "typing"
			continue
		}
		gseqs = append(gseqs, it.Event.GSeq)
		if it.ID != strings.TrimSpace(jsonInt(it.Event.GSeq)) {
			t.Errorf("global id %q for gseq %d", it.ID, it.Event.GSeq)
		}
	}
	for i, g := range gseqs {
		if g != int64(i+1) {
			t.Fatalf("global gseqs = %v, want 1..4", gseqs)
		}
	}

	// From the end: only what is appended afterwards.
	tail, err := c.Stream(ctx, "b", -1)
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	if _, err := c.Append(ctx, "b", msg("user", "later"), ""); err != nil {
		t.Fatal(err)
	}
	if it, err := tail.Next(); err != nil || it.Event.Text() != "later" {
		t.Fatalf("stream from the end = %+v, %v", it, err)
	}

	_, err = c.Stream(ctx, "a", 42)
	wantCode(t, err, agentbridge.ECodeCursorAhead)
	_, err = c.Stream(ctx, "zz", 0)
	wantCode(t, err, agentbridge.ECodeThreadNotFound)
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// BenchmarkAppend measures one client's append round trip against a real
// bridge; BenchmarkAppendParallel lets group commit batch them.
func BenchmarkAppend(b *testing.B) {
	c := startBridgeB(b)
	in := msg("user", "hello")
	for b.Loop() {
		if _, err := c.Append(b.Context(), "t", in, ""); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStreamDelivery(b *testing.B) {
	c := startBridgeB(b)
	s, err := c.Stream(b.Context(), "t", -1)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	in := msg("user", "hello")
	var wg sync.WaitGroup
	for b.Loop() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Append(b.Context(), "t", in, ""); err != nil {
				b.Error(err)
			}
		}()
		if _, err := s.Next(); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
	}
}

func startBridgeB(b *testing.B) *client.Client {
	b.Helper()
	c := startBridge(b, "")
	if _, err := c.CreateThread(b.Context(), agentbridge.CreateThreadRequest{ID: "t"}); err != nil {
		b.Fatal(err)
	}
	return c
}

// TestReceiptsAgainstServer puts receipts, lists them, and reads their
// changes from both streams as Receipt items.
func TestReceiptsAgainstServer(t *testing.T) {
	t.Parallel()
	c := startBridge(t, "")
	ctx := t.Context()
	if _, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "r"}); err != nil {
		t.Fatal(err)
	}
	ev, err := c.Append(ctx, "r", msg("user", "hi @codex"), "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Stream(ctx, "r", -1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := c.StreamAll(ctx, ev.GSeq)
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	in := agentbridge.ReceiptInput{Thread: "r", Event: ev.ID, Participant: "codex", From: "bridge-coordinator", State: agentbridge.ReceiptRunning, Invocation: "9"}
	rc, changed, err := c.PutReceipt(ctx, in)
	if err != nil || !changed || rc.State != "running" || rc.Invocation != "9" || rc.UpdatedAt == "" {
		t.Fatalf("PutReceipt = %+v %v %v", rc, changed, err)
	}
	if _, changed, err := c.PutReceipt(ctx, in); err != nil || changed {
		t.Fatalf("repeated PutReceipt changed=%v err=%v", changed, err)
	}
	in.State = "nonsense"
	_, _, err = c.PutReceipt(ctx, in)
	wantCode(t, err, agentbridge.ECodeInvalidField)
	in.State, in.Event = agentbridge.ReceiptQueued, "01NOPE"
	_, _, err = c.PutReceipt(ctx, in)
	wantCode(t, err, agentbridge.ECodeEventNotFound)
	list, err := c.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: "r", Event: ev.ID})
	if err != nil || len(list) != 1 || list[0].Participant != "codex" || list[0].State != "running" {
		t.Fatalf("Receipts = %+v %v", list, err)
	}
	for _, st := range []*client.Stream{s, all} {
		it, err := st.Next()
		if err != nil || it.Receipt == nil || it.Receipt.Thread != "r" || it.Receipt.State != "running" || it.ID != "" {
			t.Fatalf("stream item = %+v %v, want the running receipt", it, err)
		}
	}
}
