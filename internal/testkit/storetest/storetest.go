// Package storetest is the behaviour every agentbridge.EventStore shares,
// as one test suite: each store package runs it against its own store
// (Run), so that SQLite and PostgreSQL cannot drift apart. Tests of one
// store's machinery (SQLite's group commit, migrations) stay with it.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// Factory opens a fresh, empty store for t, closed when t ends. humans is
// the store's human list; nil means agentbridge.DefaultHumans.
type Factory func(t *testing.T, humans agentbridge.Humans) agentbridge.EventStore

// Run runs every shared behaviour test against stores from newStore.
func Run(t *testing.T, newStore Factory) {
	for _, c := range []struct {
		name string
		test func(*testing.T, Factory)
	}{
		{"ConcurrentAppendsAreOrdered", testConcurrentAppendsAreOrdered},
		{"AppendErrors", testAppendErrors},
		{"CreateThread", testCreateThread},
		{"EventRoundTrip", testEventRoundTrip},
		{"Idempotency", testIdempotency},
		{"IdempotencyConflict", testIdempotencyConflict},
		{"StateAtEveryRevision", testStateAtEveryRevision},
		{"ThreadEventsQueries", testThreadEventsQueries},
		{"ThreadsPaging", testThreadsPaging},
		{"SinceBoundaries", testSinceBoundaries},
		{"NotifyWakesAfterCommit", testNotifyWakesAfterCommit},
		{"ConcurrentCreateSameID", testConcurrentCreateSameID},
		{"Receipts", testReceipts},
		{"SceneState", testSceneState},
		{"Party", testParty},
		{"ServerAssignedHop", testServerAssignedHop},
		{"Suggestions", testSuggestions},
		{"SuggestionStatus", testSuggestionStatus},
		{"AppendIgnored", testAppendIgnored},
		{"PermissionAnswer", testPermissionAnswer},
		{"Push", testPush},
		{"PushDeliveries", testPushDeliveries},
		{"PushCaps", testPushCaps},
		{"Tokens", testTokens},
		{"PruneTokens", testPruneTokens},
		{"QuestionAnswer", testQuestionAnswer},
		{"FieldQuestionAnswer", testFieldQuestionAnswer},
		{"Coordinators", testCoordinators},
		{"Claims", testClaims},
		{"WaitingClaims", testWaitingClaims},
		{"UnservedNotices", testUnservedNotices},
		{"WaitingClaimsCap", testWaitingClaimsCap},
		{"EndNotATrigger", testEndNotATrigger},
		{"FallbackClaims", testFallbackClaims},
		{"CoordinatorNames", testCoordinatorNames},
		{"AgentTokensCap", testAgentTokensCap},
		{"ClaimsWaitForALimit", testClaimWait},
		{"PairCodes", testPairCodes},
		{"Attachments", testAttachments},
		{"EventAttachments", testEventAttachments},
		{"SweepAttachments", testSweepAttachments},
		{"SweepRacesAppends", testSweepRacesAppends},
		{"AttachmentCutShort", testAttachmentCutShort},
		{"Search", testSearch},
		{"Schedules", testSchedules},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, newStore) })
	}
}

// NewThread creates the thread id (named "thread <id>") or fails t.
func NewThread(t testing.TB, s agentbridge.EventStore, id string) agentbridge.Thread {
	t.Helper()
	th, _, err := s.CreateThread(context.Background(), agentbridge.CreateThreadRequest{ID: id, Name: "thread " + id})
	if err != nil {
		t.Fatal(err)
	}
	return th
}

// Msg is a message from from whose content is the JSON string text.
func Msg(from, text string) agentbridge.EventInput {
	b, _ := json.Marshal(text)
	return agentbridge.EventInput{From: from, Content: b}
}

// Control is a control from from with the raw JSON content.
func Control(from, content string) agentbridge.EventInput {
	return agentbridge.EventInput{Type: agentbridge.TypeControl, From: from, Content: json.RawMessage(content)}
}

// MustAppend appends in to thread or fails t.
func MustAppend(t testing.TB, s agentbridge.EventStore, thread string, in agentbridge.EventInput) agentbridge.Event {
	t.Helper()
	res, err := s.Append(context.Background(), agentbridge.AppendRequest{Thread: thread, Input: in})
	if err != nil {
		t.Fatalf("append to %s: %v", thread, err)
	}
	return res.Event
}

// WantCode fails unless err is an *agentbridge.Error with the code.
func WantCode(t *testing.T, err error, code string) *agentbridge.Error {
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

// EventAt reads the event of thread at seq back from s, as a client paging
// with after=seq-1 does.
func EventAt(s agentbridge.EventStore, thread string, seq int64) (agentbridge.Event, error) {
	evs, err := s.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: thread, After: seq - 1, Limit: 1})
	if err != nil {
		return agentbridge.Event{}, err
	}
	if len(evs) != 1 || evs[0].Seq != seq {
		return agentbridge.Event{}, fmt.Errorf("thread %s has no event at seq %d", thread, seq)
	}
	return evs[0], nil
}

// AllEvents reads every event of thread or fails t.
func AllEvents(t testing.TB, s agentbridge.EventStore, thread string) []agentbridge.Event {
	t.Helper()
	evs, err := s.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func testConcurrentAppendsAreOrdered(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	threads := []string{"a", "b", "c", "d"}
	for _, id := range threads {
		NewThread(t, s, id)
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
				if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: Msg(fmt.Sprintf("agent%d", w), fmt.Sprintf("m%d", i))}); err != nil {
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
		evs := AllEvents(t, s, th)
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
}

func testAppendErrors(t *testing.T, newStore Factory) {
	s := newStore(t, agentbridge.Humans{"user", "boss"})
	ctx := context.Background()
	th := NewThread(t, s, "t").ID
	otherEv := MustAppend(t, s, NewThread(t, s, "u").ID, Msg("user", "in u"))
	MustAppend(t, s, th, Control("user", `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"gpt"}}}`))
	// A non-human's mute and pause do not count.
	MustAppend(t, s, th, Control("codex", `{"mute":{"targets":["claude"]},"pause":{"on":true}}`))
	MustAppend(t, s, th, Msg("claude", "still allowed"))
	stored := len(AllEvents(t, s, th))

	appendErr := func(thread string, in agentbridge.EventInput) error {
		_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: thread, Input: in})
		return err
	}
	e := WantCode(t, appendErr("missing", Msg("user", "x")), agentbridge.ECodeThreadNotFound)
	if e.Thread != "missing" {
		t.Errorf("thread_not_found names thread %q", e.Thread)
	}
	WantCode(t, appendErr("bad id!", Msg("user", "x")), agentbridge.ECodeThreadNotFound)
	e = WantCode(t, appendErr(th, agentbridge.EventInput{From: "user", Content: json.RawMessage(`"x"`), Meta: agentbridge.Meta{ReplyTo: otherEv.ID}}), agentbridge.ECodeUnknownReplyTo)
	if e.Field != "meta.reply_to" {
		t.Errorf("unknown_reply_to field = %q", e.Field)
	}
	WantCode(t, appendErr(th, agentbridge.EventInput{From: "user", Content: json.RawMessage(`"x"`), Meta: agentbridge.Meta{ReplyTo: "01NOPE"}}), agentbridge.ECodeUnknownReplyTo)
	WantCode(t, appendErr(th, agentbridge.EventInput{From: "user"}), agentbridge.ECodeMissingField)
	if n := len(AllEvents(t, s, th)); n != stored {
		t.Fatalf("refused appends stored something: %d events, want %d", n, stored)
	}

	MustAppend(t, s, th, Control("boss", `{"mute":{"targets":["codex"],"mode":"hard"}}`))
	e = WantCode(t, appendErr(th, Msg("codex", "let me speak")), agentbridge.ECodeParticipantMuted)
	if e.Thread != th || e.Participant != "codex" {
		t.Errorf("participant_muted names thread %q participant %q", e.Thread, e.Participant)
	}
	// Hard mute refuses messages only.
	MustAppend(t, s, th, agentbridge.EventInput{Type: "note", From: "codex", Content: json.RawMessage(`{"x":1}`)})

	MustAppend(t, s, th, Control("user", `{"pause":{"on":true},"unmute":{"targets":["codex"]}}`))
	e = WantCode(t, appendErr(th, Msg("codex", "hello?")), agentbridge.ECodeThreadPaused)
	if e.Thread != th || e.Participant != "codex" {
		t.Errorf("thread_paused names thread %q participant %q", e.Thread, e.Participant)
	}
	MustAppend(t, s, th, Msg("boss", "humans may still talk"))
	MustAppend(t, s, th, Control("codex", `{"invite":{"participant_id":"gemini","profile":{"client":"gemini","model":"g"}}}`))
	MustAppend(t, s, th, Control("user", `{"pause":{"on":false}}`))
	MustAppend(t, s, th, Msg("codex", "back"))

	if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: Msg("user", "x"), IdempotencyKey: string(make([]byte, 300))}); err == nil {
		t.Error("a 300-byte idempotency key was accepted")
	}
}

func testCreateThread(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()

	th, ev, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if th.Name != "Untitled" || len(th.ID) != 26 || th.LastSeq != 1 || th.EventCount != 1 || th.CreatedAt != ev.TS || th.UpdatedAt != ev.TS {
		t.Errorf("default thread = %+v", th)
	}
	if ev.Type != agentbridge.TypeThreadCreated || ev.From != "user" || ev.To != "all" || ev.Text() != "Untitled" || ev.Seq != 1 {
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
	e := WantCode(t, firstErr(s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "my-thread_1.x"})), agentbridge.ECodeThreadExists)
	if e.Thread != "my-thread_1.x" {
		t.Errorf("thread_exists names %q", e.Thread)
	}
	for _, req := range []agentbridge.CreateThreadRequest{{ID: "-bad"}, {ID: "has space"}, {ID: string(make([]byte, 65))}} {
		if e := WantCode(t, firstErr(s.CreateThread(ctx, req)), agentbridge.ECodeInvalidField); e.Field != "id" {
			t.Errorf("invalid id %q: field %q", req.ID, e.Field)
		}
	}
	if e := WantCode(t, firstErr(s.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "  "})), agentbridge.ECodeInvalidField); e.Field != "name" {
		t.Errorf("blank name: field %q", e.Field)
	}
	if e := WantCode(t, firstErr(s.CreateThread(ctx, agentbridge.CreateThreadRequest{From: "no spaces"})), agentbridge.ECodeInvalidField); e.Field != "from" {
		t.Errorf("bad from: field %q", e.Field)
	}
	if _, err := s.Thread(ctx, "nope"); agentbridge.ErrorCode(err) != agentbridge.ECodeThreadNotFound {
		t.Errorf("Thread(nope): %v", err)
	}

	ren := MustAppend(t, s, th2.ID, agentbridge.EventInput{Type: agentbridge.TypeThreadRenamed, From: "user", Content: json.RawMessage(`"Better plans"`)})
	got, _ = s.Thread(ctx, th2.ID)
	if got.Name != "Better plans" || got.UpdatedAt != ren.TS || got.LastSeq != 2 {
		t.Errorf("after rename: %+v", got)
	}
	// A name is any valid text, a NUL byte included.
	nul, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "a\x00b"})
	if err != nil {
		t.Fatalf("a name with a NUL byte: %v", err)
	}
	if got, err := s.Thread(ctx, nul.ID); err != nil || got.Name != "a\x00b" {
		t.Errorf("name with a NUL byte read back as %q, %v", got.Name, err)
	}
}

func firstErr(_ agentbridge.Thread, _ agentbridge.Event, err error) error { return err }

func testEventRoundTrip(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	th := NewThread(t, s, "t").ID
	first := MustAppend(t, s, th, Msg("user", "hi"))

	body := fmt.Sprintf(`{"from":"codex","to":"user","content":"réponse \u00e9 \"quoted\"",
		"meta":{"reply_to":%q,"tags":["coordinator"],"via":"bridge-coordinator","custom":{"b": [1, 2.50, null]},"z":"last"}}`, first.ID)
	in, err := agentbridge.ParseEventInput([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	cases := []agentbridge.EventInput{
		in,
		{Type: "custom.kind", From: "tool", Content: nil},
		{Type: "custom.kind", From: "tool", Content: json.RawMessage(`{"nested": {"a": [1,2,3]}, "s": "x"}`)},
		{Type: agentbridge.TypeControl, From: "user", Content: json.RawMessage(`"{\"pause\":{\"on\":false}}"`), Meta: agentbridge.Meta{Tags: []string{}}},
		// Typed keys only: stored without decoding its own encoding again.
		{From: "codex", Content: json.RawMessage(`"x"`), Meta: agentbridge.Meta{ReplyTo: first.ID, Tags: []string{"a", "b"}, Via: "v"}},
		// Invalid UTF-8 is stored as U+FFFD; the answer must say so too.
		{From: "codex", Content: json.RawMessage(`"x"`), Meta: agentbridge.Meta{Tags: []string{"bad\xff"}, Via: "v\xfe"}},
	}
	for i, in := range cases {
		res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: in})
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		got, err := EventAt(s, th, res.Event.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, res.Event) {
			t.Errorf("case %d: stored event differs from the appended one:\n got %+v\nwant %+v", i, got, res.Event)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(res.Event)
		if string(a) != string(b) {
			t.Errorf("case %d: JSON differs:\n%s\n%s", i, a, b)
		}
	}
	ev, _ := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: th, After: 2, Limit: 1})
	if string(ev[0].Content) != `"réponse \u00e9 \"quoted\""` {
		t.Errorf("content not kept as given: %s", ev[0].Content)
	}
	if string(ev[0].Meta.Extra["custom"]) != `{"b": [1, 2.50, null]}` || ev[0].Meta.Hop == nil || *ev[0].Meta.Hop != 1 || ev[0].Meta.Via != "bridge-coordinator" {
		t.Errorf("meta not kept as given: %+v", ev[0].Meta)
	}
}

func testIdempotency(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	th := NewThread(t, s, "t").ID
	other := NewThread(t, s, "u").ID
	req := agentbridge.AppendRequest{Thread: th, Input: Msg("codex", "reply"), IdempotencyKey: "trigger-1/codex"}
	first, err := s.Append(ctx, req)
	if err != nil || first.Replayed {
		t.Fatalf("first append: %+v %v", first, err)
	}
	// The retry is answered even if the thread has since been paused.
	MustAppend(t, s, th, Control("user", `{"pause":{"on":true}}`))
	again, err := s.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || !reflect.DeepEqual(again.Event, first.Event) {
		t.Fatalf("retry = %+v, want the first event replayed", again)
	}
	// The same key in another thread is another append.
	req.Thread = other
	res, err := s.Append(ctx, req)
	if err != nil || res.Replayed || res.Event.Thread != other {
		t.Fatalf("same key in another thread: %+v %v", res, err)
	}
	if n := len(AllEvents(t, s, th)); n != 3 {
		t.Errorf("thread has %d events, want 3: the retry stored something", n)
	}
}

// testIdempotencyConflict: a key used first by another writer is never
// answered with that writer's event: another sender, type, recipient,
// content or meta is 409 idempotency_conflict and stores nothing, while the
// first writer's own retry, meta with extra keys included, is still
// replayed.
func testIdempotencyConflict(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	th := NewThread(t, s, "t").ID
	trigger := MustAppend(t, s, th, Msg("user", "hi @codex"))
	reply := Msg("codex", "the real reply")
	reply.Meta = agentbridge.Meta{ReplyTo: trigger.ID, Via: "bridge-coordinator", Tags: []string{"coordinator"},
		Extra: map[string]json.RawMessage{"participant": json.RawMessage(` "codex" `)}}
	forged := Msg("mallory", "forged")
	forged.Meta.ReplyTo = trigger.ID
	const key = "coord-0123456789abcdef"
	first, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: forged, IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	head := len(AllEvents(t, s, th))
	sameSender := Msg("mallory", "other words")
	sameSender.Meta.ReplyTo = trigger.ID
	otherMeta := forged
	otherMeta.Meta.Tags = []string{"x"}
	otherTo := forged
	otherTo.To = "codex"
	for name, in := range map[string]agentbridge.EventInput{
		"another sender": reply, "other content": sameSender, "other meta": otherMeta, "another recipient": otherTo,
	} {
		res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: in, IdempotencyKey: key})
		var e *agentbridge.Error
		if !errors.As(err, &e) || e.Code != agentbridge.ECodeIdempotencyConflict || e.Message == "" {
			t.Fatalf("%s under a used key: %+v %v, want idempotency_conflict", name, res, err)
		}
		if strings.Contains(e.Message, "forged") || strings.Contains(e.Message, first.Event.ID) {
			t.Errorf("%s: the refusal tells of the other event: %s", name, e.Message)
		}
	}
	if n := len(AllEvents(t, s, th)); n != head {
		t.Fatalf("a refused replay stored something: %d events, want %d", n, head)
	}
	again, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: forged, IdempotencyKey: key})
	if err != nil || !again.Replayed || again.Event.ID != first.Event.ID {
		t.Fatalf("the first writer's retry: %+v %v, want its event replayed", again, err)
	}
	for i := range 2 {
		res, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: reply, IdempotencyKey: "other-key"})
		if err != nil || res.Replayed != (i == 1) {
			t.Fatalf("append %d of a meta with extra keys: %+v %v", i, res, err)
		}
	}
}

func testStateAtEveryRevision(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	th := NewThread(t, s, "t").ID
	inputs := []agentbridge.EventInput{
		Control("user", `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"gpt-5","roles":["reviewer"]}}}`),
		Msg("user", "hello"),
		Msg("codex", "hi"),
		Msg("claude", "second agent"),
		Msg("claude", "unstamped"),
		Control("user", `{"mute":{"targets":["claude"],"mode":"hard"},"discussion":{"on":true}}`),
		Control("codex", `{"pause":{"on":true}}`), // not human: no change
		Control("user", `{"pause":{"on":true},"invited_auto":{"on":true}}`),
		Msg("user", "paused now"),
		Control("user", `{"mute":{"targets":["codex"],"mode":"soft"},"unmute":{"targets":["claude"]}}`),
		Control("claude", `{"invite":{"participant_id":"claude","profile":{"client":"claude","model":"opus","nickname":"C"}}}`),
		Control("user", `{"pause":{"on":false},"discussion":{"on":true,"allow_agent_mentions":false}}`),
		Control("user", `{"uninvite":{"participant_id":"codex"}}`),
		Msg("codex", "still here"),
	}
	for _, in := range inputs {
		MustAppend(t, s, th, in)
	}
	evs := AllEvents(t, s, th)
	var want agentbridge.ThreadState
	for _, ev := range evs {
		want = agentbridge.Fold(want, ev, agentbridge.DefaultHumans)
		got, seq, err := s.State(ctx, th, ev.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if seq != ev.Seq || !reflect.DeepEqual(got, want.Normalize()) {
			t.Fatalf("State(at=%d) = %+v (seq %d), want %+v", ev.Seq, got, seq, want.Normalize())
		}
	}
	now, seq, err := s.State(ctx, th, 0)
	if err != nil || seq != int64(len(evs)) || !reflect.DeepEqual(now, want.Normalize()) {
		t.Fatalf("State(now) = %+v seq %d %v, want %+v seq %d", now, seq, err, want.Normalize(), len(evs))
	}
	if now.LastHop != 1 || now.Paused || len(now.Participants.Invited) != 1 {
		t.Errorf("final state looks wrong: %+v", now)
	}
	e := WantCode(t, stateErr(s.State(ctx, th, int64(len(evs))+1)), agentbridge.ECodeCursorAhead)
	if e.Head == nil || *e.Head != int64(len(evs)) {
		t.Errorf("cursor_ahead head = %v, want %d", e.Head, len(evs))
	}
	WantCode(t, stateErr(s.State(ctx, th, -1)), agentbridge.ECodeInvalidField)
	WantCode(t, stateErr(s.State(ctx, "nope", 0)), agentbridge.ECodeThreadNotFound)
}

func stateErr(_ agentbridge.ThreadState, _ int64, err error) error { return err }

func testThreadEventsQueries(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	th := NewThread(t, s, "t").ID
	for i := 2; i <= 30; i++ {
		MustAppend(t, s, th, Msg("user", fmt.Sprint(i)))
	}
	all := AllEvents(t, s, th)
	seqs := func(evs []agentbridge.Event) string {
		var b strings.Builder
		for _, e := range evs {
			fmt.Fprintf(&b, "%d,", e.Seq)
		}
		return b.String()
	}
	rng := func(lo, hi int) string {
		var b strings.Builder
		for i := lo; i <= hi; i++ {
			fmt.Fprintf(&b, "%d,", i)
		}
		return b.String()
	}
	for _, c := range []struct {
		q    agentbridge.ThreadEventsQuery
		want string
	}{
		{agentbridge.ThreadEventsQuery{After: -1}, rng(1, 30)},
		{agentbridge.ThreadEventsQuery{After: 0}, rng(1, 30)},
		{agentbridge.ThreadEventsQuery{After: 25}, rng(26, 30)},
		{agentbridge.ThreadEventsQuery{After: 30}, ""},
		{agentbridge.ThreadEventsQuery{After: 10, Limit: 3}, rng(11, 13)},
		{agentbridge.ThreadEventsQuery{After: -1, Since: all[19].TS}, rng(21, 30)},
		{agentbridge.ThreadEventsQuery{After: -1, Since: all[29].TS}, ""},
		{agentbridge.ThreadEventsQuery{After: -1, Since: "2000-01-01T00:00:00.000000Z", Limit: 2}, rng(1, 2)},
		{agentbridge.ThreadEventsQuery{After: -1, Since: "9999"}, ""},
		{agentbridge.ThreadEventsQuery{After: 5, Since: all[19].TS}, rng(6, 30)}, // After wins
		{agentbridge.ThreadEventsQuery{After: -1, Tail: 5}, rng(26, 30)},
		{agentbridge.ThreadEventsQuery{After: -1, Tail: 50}, rng(1, 30)},
		{agentbridge.ThreadEventsQuery{After: -1, Tail: 5, Limit: 2}, rng(26, 27)},
		{agentbridge.ThreadEventsQuery{After: -1, Until: 10}, rng(1, 10)},
		{agentbridge.ThreadEventsQuery{After: -1, Until: 10, Tail: 3}, rng(8, 10)},
		{agentbridge.ThreadEventsQuery{After: 4, Until: 10}, rng(5, 10)},
		{agentbridge.ThreadEventsQuery{After: -1, Limit: 4}, rng(1, 4)},
	} {
		c.q.Thread = th
		got, err := s.ThreadEvents(ctx, c.q)
		if err != nil {
			t.Fatalf("%+v: %v", c.q, err)
		}
		if seqs(got) != c.want {
			t.Errorf("%+v: seqs %s, want %s", c.q, seqs(got), c.want)
		}
	}

	qErr := func(q agentbridge.ThreadEventsQuery) error {
		_, err := s.ThreadEvents(ctx, q)
		return err
	}
	e := WantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: 31}), agentbridge.ECodeCursorAhead)
	if e.Head == nil || *e.Head != 30 || e.Thread != th {
		t.Errorf("cursor_ahead = %+v, want head 30", e)
	}
	WantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: -1, Until: 31}), agentbridge.ECodeCursorAhead)
	if e := WantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: -1, Limit: agentbridge.MaxEventsLimit + 1}), agentbridge.ECodeInvalidField); e.Field != "limit" {
		t.Errorf("limit over max: field %q", e.Field)
	}
	WantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: -1, Limit: -1}), agentbridge.ECodeInvalidField)
	WantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: -2}), agentbridge.ECodeInvalidField)
	WantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: th, After: -1, Tail: -1}), agentbridge.ECodeInvalidField)
	WantCode(t, qErr(agentbridge.ThreadEventsQuery{Thread: "nope", After: -1}), agentbridge.ECodeThreadNotFound)

	// The global log.
	head, _ := s.Head(ctx)
	page, err := s.Events(ctx, head-3, 2)
	if err != nil || len(page) != 2 || page[0].GSeq != head-2 {
		t.Fatalf("Events(head-3, 2) = %d events %v", len(page), err)
	}
	if evs, err := s.Events(ctx, head, 0); err != nil || len(evs) != 0 {
		t.Fatalf("Events(head) = %v %v, want empty", evs, err)
	}
	e = WantCode(t, eventsErr(s.Events(ctx, head+1, 0)), agentbridge.ECodeCursorAhead)
	if e.Head == nil || *e.Head != head {
		t.Errorf("global cursor_ahead head = %v, want %d", e.Head, head)
	}
	WantCode(t, eventsErr(s.Events(ctx, 0, agentbridge.MaxEventsLimit+1)), agentbridge.ECodeInvalidField)
	WantCode(t, eventsErr(s.Events(ctx, -1, 0)), agentbridge.ECodeInvalidField)
}

func eventsErr(_ []agentbridge.Event, err error) error { return err }

func testThreadsPaging(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	if ths, err := s.Threads(ctx, "", 0); err != nil || len(ths) != 0 {
		t.Fatalf("empty store: %v %v", ths, err)
	}
	for i := range 7 {
		NewThread(t, s, fmt.Sprintf("t%d", i))
	}
	// Touch some threads so recency differs from creation order.
	for _, id := range []string{"t2", "t5", "t0"} {
		MustAppend(t, s, id, Msg("user", "bump"))
	}
	want := []string{"t0", "t5", "t2", "t6", "t4", "t3", "t1"}
	var got []string
	after := ""
	for pages := 0; pages < 10; pages++ {
		page, err := s.Threads(ctx, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, th := range page {
			got = append(got, th.ID)
		}
		after = page[len(page)-1].ID
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paged threads %v, want %v", got, want)
	}
	all, _ := s.Threads(ctx, "", 0)
	for i := 1; i < len(all); i++ {
		if all[i].UpdatedAt > all[i-1].UpdatedAt {
			t.Fatalf("threads not most recently updated first: %v", all)
		}
	}
	if all[0].LastSeq != 2 || all[0].EventCount != 2 {
		t.Errorf("t0 = %+v, want last_seq=event_count=2", all[0])
	}
	if _, err := s.Threads(ctx, "nope", 2); agentbridge.ErrorCode(err) != agentbridge.ECodeInvalidField {
		t.Errorf("after an unknown thread: %v", err)
	}
	if _, err := s.Threads(ctx, "", -1); agentbridge.ErrorCode(err) != agentbridge.ECodeInvalidField {
		t.Errorf("negative limit: %v", err)
	}
}

// TestSinceBoundaries checks firstAfter's search against a plain filter on
// every ts of threads of 1 to 40 events: since equal to an event's ts,
// between two events, before the first and after the last.
func testSinceBoundaries(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	for n := 1; n <= 40; n++ {
		th := NewThread(t, s, fmt.Sprintf("t%d", n)).ID
		for i := 2; i <= n; i++ {
			MustAppend(t, s, th, Msg("user", fmt.Sprint(i)))
		}
		all := AllEvents(t, s, th)
		sinces := []string{"", "2000-01-01T00:00:00.000000Z", all[0].TS[:10], "9999", all[n-1].TS + "0"}
		for _, ev := range all {
			ts, err := agentbridge.ParseTime(ev.TS)
			if err != nil {
				t.Fatal(err)
			}
			// Equal, a microsecond before (equal to the previous event's ts
			// or between the two), and a string between it and the next.
			sinces = append(sinces, ev.TS, agentbridge.FormatTime(ts.Add(-time.Microsecond)), ev.TS+"x")
		}
		for _, since := range sinces {
			if since == "" {
				continue
			}
			var want []int64
			for _, ev := range all {
				if ev.TS > since {
					want = append(want, ev.Seq)
				}
			}
			got, err := s.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: th, After: -1, Since: since})
			if err != nil {
				t.Fatalf("n=%d since=%s: %v", n, since, err)
			}
			var gotSeqs []int64
			for _, ev := range got {
				gotSeqs = append(gotSeqs, ev.Seq)
			}
			if !slices.Equal(gotSeqs, want) {
				t.Errorf("n=%d since=%s: seqs %v, want %v", n, since, gotSeqs, want)
			}
		}
	}
}

// testNotifyWakesAfterCommit checks that a channel grabbed before an
// append is closed once the append has committed, and that whoever wakes
// finds the event.
func testNotifyWakesAfterCommit(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	NewThread(t, s, "t")
	ch := s.Notify()
	MustAppend(t, s, "t", Msg("user", "hello"))
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Notify did not fire after the commit")
	}
	if evs := AllEvents(t, s, "t"); len(evs) != 2 {
		t.Fatalf("after wake-up the thread has %d events, want 2", len(evs))
	}
	testutil.WaitFor(t, 10*time.Second, "a fresh Notify channel", func() bool {
		select {
		case <-s.Notify():
			return false
		default:
			return true
		}
	})
}

// testConcurrentCreateSameID races creations of one thread id: exactly one
// wins, the others get thread_exists.
func testConcurrentCreateSameID(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	const n = 8
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "same"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case agentbridge.ErrorCode(err) != agentbridge.ECodeThreadExists:
			t.Errorf("losing create: %v, want thread_exists", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d creations of one id succeeded, want 1", won)
	}
	if evs := AllEvents(t, s, "same"); len(evs) != 1 {
		t.Fatalf("thread holds %d events, want 1", len(evs))
	}
}

// testReceipts checks the receipt side (agentbridge.ReceiptStore) of a
// store that has one: the latest receipt per pair, an unchanged report
// changing nothing, typed refusals that store nothing.
func testReceipts(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	rs, ok := s.(agentbridge.ReceiptStore)
	if !ok {
		t.Skip("the store keeps no receipts")
	}
	ctx := context.Background()
	th := NewThread(t, s, "t").ID
	ev := MustAppend(t, s, th, Msg("user", "@codex hi"))
	other := MustAppend(t, s, NewThread(t, s, "u").ID, Msg("user", "elsewhere"))
	in := agentbridge.ReceiptInput{Thread: th, Event: ev.ID, Participant: "codex", From: "coordinator", State: agentbridge.ReceiptQueued}
	first, changed, err := rs.PutReceipt(ctx, in)
	if err != nil || !changed || first.State != agentbridge.ReceiptQueued || first.Thread != th || first.UpdatedAt == "" {
		t.Fatalf("first receipt: %+v changed=%v %v", first, changed, err)
	}
	again, changed, err := rs.PutReceipt(ctx, in)
	if err != nil || changed || again.UpdatedAt != first.UpdatedAt {
		t.Fatalf("same receipt again: %+v changed=%v %v, want unchanged", again, changed, err)
	}
	in.State, in.Invocation = agentbridge.ReceiptRunning, "inv-1"
	if _, changed, err := rs.PutReceipt(ctx, in); err != nil || !changed {
		t.Fatalf("running: changed=%v %v", changed, err)
	}
	in.Participant = "claude"
	in.State, in.Reason, in.Invocation = agentbridge.ReceiptSkipped, "not addressed", ""
	if _, _, err := rs.PutReceipt(ctx, in); err != nil {
		t.Fatal(err)
	}
	list, err := rs.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: th})
	if err != nil || len(list) != 2 || list[0].Participant != "claude" || list[1].State != agentbridge.ReceiptRunning || list[1].Invocation != "inv-1" {
		t.Fatalf("Receipts = %+v %v", list, err)
	}
	if list, err := rs.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: th, Event: "01NOPE"}); err != nil || len(list) != 0 {
		t.Fatalf("Receipts of another event = %+v %v", list, err)
	}
	bad := in
	bad.Event = other.ID
	WantCode(t, func() error { _, _, err := rs.PutReceipt(ctx, bad); return err }(), agentbridge.ECodeEventNotFound)
	bad = in
	bad.Thread = "nope"
	WantCode(t, func() error { _, _, err := rs.PutReceipt(ctx, bad); return err }(), agentbridge.ECodeThreadNotFound)
	bad = in
	bad.State = "done"
	WantCode(t, func() error { _, _, err := rs.PutReceipt(ctx, bad); return err }(), agentbridge.ECodeInvalidField)
	if _, err := rs.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: "nope"}); agentbridge.ErrorCode(err) != agentbridge.ECodeThreadNotFound {
		t.Errorf("Receipts of an unknown thread: %v", err)
	}
	if list, _ := rs.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: th}); len(list) != 2 {
		t.Errorf("refused receipts stored something: %+v", list)
	}
	if list, err := rs.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: th, Limit: 1}); err != nil || len(list) != 1 || list[0].Participant != "claude" {
		t.Errorf("Receipts with limit 1 = %+v %v", list, err)
	}
	if list, err := rs.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: th, FromEvent: in.Event}); err != nil || len(list) != 2 {
		t.Errorf("Receipts from their event = %+v %v", list, err)
	}
	if list, err := rs.Receipts(ctx, agentbridge.ReceiptsQuery{Thread: th, FromEvent: in.Event + "~"}); err != nil || len(list) != 0 {
		t.Errorf("Receipts from after their event = %+v %v", list, err)
	}
}

// testParty: a party control naming an agent who is not invited is
// refused with the id named and nothing stored; an exit word from a human
// to all ends party mode at that revision, which State(at) shows.
func testParty(t *testing.T, newStore Factory) {
	s := newStore(t, nil)
	ctx := context.Background()
	th := NewThread(t, s, "t").ID
	MustAppend(t, s, th, Control("user", `{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m","expertise":["go"]}}}`))
	before := len(AllEvents(t, s, th))
	_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: th, Input: Control("user", `{"party":{"on":true,"agents":["codex","ghost"]}}`)})
	if e := WantCode(t, err, agentbridge.ECodeInvalidControl); e.Participant != "ghost" || e.Field != "content.party.agents" {
		t.Errorf("unknown party agent: %+v", e)
	}
	if n := len(AllEvents(t, s, th)); n != before {
		t.Fatalf("a refused party control was stored (%d events, want %d)", n, before)
	}
	for _, in := range []agentbridge.EventInput{
		Control("user", `{"party":{"on":true,"agents":["codex"],"max_agents":1}}`),
		Msg("user", "what about go?"),
		Msg("codex", "I quit"), // not human: no change
		Msg("user", "thanks, goodbye"),
		Msg("user", "still here"),
	} {
		MustAppend(t, s, th, in)
	}
	var want agentbridge.ThreadState
	for _, ev := range AllEvents(t, s, th) {
		want = agentbridge.Fold(want, ev, agentbridge.DefaultHumans)
		got, _, err := s.State(ctx, th, ev.Seq)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want.Normalize()) {
			t.Fatalf("State(at=%d).Party = %+v, want %+v", ev.Seq, got.Party, want.Normalize().Party)
		}
	}
	if now, _, _ := s.State(ctx, th, 0); now.Party.On || now.Party.MaxAgents != 1 {
		t.Errorf("party after goodbye = %+v, want off with its settings kept", now.Party)
	}
}
