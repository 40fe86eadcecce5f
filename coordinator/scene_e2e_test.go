package coordinator_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// sceneStack invites alice and bob as actors with character sheets that
// hold markers, so that a leak into the other's payload can be searched.
func sceneStack(t *testing.T, mutate func(*config.Config)) (*stack, string) {
	s := startStack(t, mutate)
	th := s.thread("kitchen")
	for _, id := range []string{"alice", "bob"} {
		s.invite(th, id, agentbridge.Profile{Character: "CHAR-" + id + " a character sheet"})
	}
	return s, th
}

func (s *stack) startScene(th string, scene map[string]any) agentbridge.Event {
	s.t.Helper()
	scene["on"] = true
	if scene["actors"] == nil {
		scene["actors"] = []string{"alice", "bob"}
	}
	return s.control(th, "user", map[string]any{"scene": scene})
}

// waitSceneClosed waits until the thread's scene is closed and every
// actor's journal event is in the log, and returns the log.
func (s *stack) waitSceneClosed(th string, journals int) []agentbridge.Event {
	s.t.Helper()
	var evs []agentbridge.Event
	testutil.WaitFor(s.t, waitLong, "the scene to close and the journals to be written", func() bool {
		evs = s.events(th)
		n := 0
		for _, e := range evs {
			if e.Type == agentbridge.TypeJournal {
				n++
			}
		}
		st, _, err := s.cl.State(context.Background(), th, 0)
		return err == nil && st.Scene != nil && st.Scene.Status == agentbridge.SceneClosed && n >= journals
	})
	return evs
}

func ofType(evs []agentbridge.Event, typ string) []agentbridge.Event {
	var out []agentbridge.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func speeches(evs []agentbridge.Event) []agentbridge.Event {
	var out []agentbridge.Event
	for _, e := range ofType(evs, agentbridge.TypeMessage) {
		if m, ok := agentbridge.SceneMetaOf(e); ok && m.Turn > 0 {
			out = append(out, e)
		}
	}
	return out
}

// payloadsOf reads every payload the fake saved for participant.
func (s *stack) payloadsOf(participant string) map[string]adapters.Payload {
	s.t.Helper()
	files, _ := filepath.Glob(filepath.Join(s.fakeDir, "*-"+participant+".json"))
	corr, _ := filepath.Glob(filepath.Join(s.fakeDir, "*-"+participant+"-corr.json"))
	out := map[string]adapters.Payload{}
	for _, f := range append(files, corr...) {
		b, err := os.ReadFile(f)
		if err != nil {
			s.t.Fatal(err)
		}
		var p adapters.Payload
		if err := json.Unmarshal(b, &p); err != nil {
			s.t.Fatalf("%s: %v", f, err)
		}
		out[string(b)] = p
	}
	return out
}

// TestSceneNaturalCloseJournalsAndPrivacy runs a whole scene: alternating
// turns, a natural close one answer after the closing line, one
// scene.closed, a journal per actor fed into the next scene, and no
// private thinking, character or brief of one actor in anything the
// other received.
func TestSceneNaturalCloseJournalsAndPrivacy(t *testing.T) {
	t.Parallel()
	s, th := sceneStack(t, func(c *config.Config) { c.MaxAgentHops = 2 })
	s.startScene(th, map[string]any{"setting": "A small kitchen.", "briefs": map[string]string{
		"alice": "BRIEF-alice fake:close=3", "bob": "BRIEF-bob"}})
	evs := s.waitSceneClosed(th, 2)

	sp := speeches(evs)
	if len(sp) != 4 {
		t.Fatalf("%d speeches, want 4 (the loop guard at 2 hops must not stop a scene): %+v", len(sp), sp)
	}
	for i, e := range sp {
		from, to := "alice", "bob"
		if i%2 == 1 {
			from, to = to, from
		}
		m, _ := agentbridge.SceneMetaOf(e)
		if e.From != from || e.To != to || m.Turn != i+1 {
			t.Errorf("speech %d: %s -> %s turn %d, want %s -> %s turn %d", i, e.From, e.To, m.Turn, from, to, i+1)
		}
	}
	thinking := ofType(evs, agentbridge.TypeThinking)
	if len(thinking) != 4 {
		t.Fatalf("%d thinking events, want 4", len(thinking))
	}
	for _, e := range thinking {
		if e.To != e.From || !agentbridge.IsPrivate(e) {
			t.Errorf("thinking not private to its actor: %+v", e)
		}
	}
	closed := ofType(evs, agentbridge.TypeSceneClosed)
	if len(closed) != 1 || closed[0].Text() != agentbridge.CloseNatural || closed[0].From != s.cfg.CoordinatorID {
		t.Fatalf("scene.closed events: %+v, want one, natural, from the coordinator", closed)
	}
	st, _, err := s.cl.State(context.Background(), th, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Scene.Turns["alice"] != 2 || st.Scene.Turns["bob"] != 2 || st.Scene.CloseReason != agentbridge.CloseNatural {
		t.Errorf("scene state: %+v", st.Scene)
	}
	for _, e := range ofType(evs, agentbridge.TypeJournal) {
		if e.To != e.From || !agentbridge.IsPrivate(e) || !strings.Contains(e.Text(), "JOURNAL-"+e.From) {
			t.Errorf("journal event: %+v", e)
		}
	}

	// Privacy: nothing of one actor's in any payload of the other.
	for actor, other := range map[string]string{"alice": "bob", "bob": "alice"} {
		ps := s.payloadsOf(actor)
		if len(ps) != 3 {
			t.Errorf("%s received %d payloads, want 3 (two turns, one journal)", actor, len(ps))
		}
		for raw, p := range ps {
			for _, secret := range []string{"SECRET-" + other, "CHAR-" + other, "BRIEF-" + other, "JOURNAL-" + other} {
				if strings.Contains(raw, secret) {
					t.Errorf("a payload of %s holds %s:\n%s", actor, secret, raw)
				}
			}
			if p.Scene == nil || p.Scene.Actor != actor || p.Scene.Character != "CHAR-"+actor+" a character sheet" || !strings.HasPrefix(p.Scene.Brief, "BRIEF-"+actor) || p.Scene.Setting != "A small kitchen." {
				t.Errorf("%s's briefing: %+v", actor, p.Scene)
			}
		}
	}

	// The journal is kept by the coordinator and briefs the next scene.
	resp, err := http.Get(s.coord.StatusURL() + "/journals/alice")
	if err != nil {
		t.Fatal(err)
	}
	var j status.JournalResponse
	err = json.NewDecoder(resp.Body).Decode(&j)
	resp.Body.Close()
	if err != nil || len(j.Entries) != 1 || !strings.Contains(j.Text, "JOURNAL-alice") || !strings.Contains(j.Text, "## ") {
		t.Fatalf("alice's journal: %+v (%v)", j, err)
	}
	start := s.startScene(th, map[string]any{"first": "bob", "briefs": map[string]string{"bob": "fake:end=3"}})
	s.waitSceneClosed(th, 4)
	var second adapters.Payload
	for raw, p := range s.payloadsOf("alice") {
		if p.Scene != nil && p.Scene.Step == agentbridge.SceneStepTurn && p.Scene.Turn == 2 && !strings.Contains(raw, "BRIEF-alice") {
			second = p
		}
	}
	if !strings.Contains(second.Scene.Journal, "JOURNAL-alice") {
		t.Errorf("alice's second briefing lacks her journal: %+v", second.Scene)
	}
	if d := s.decision(start.ID); d.Rule != rules.RuleScene || len(d.Invoke) != 1 || d.Invoke[0].Participant != "bob" {
		t.Errorf("scene start decision: %+v", d)
	}
	st, _, _ = s.cl.State(context.Background(), th, 0)
	if st.Scene.CloseReason != agentbridge.CloseExplicit {
		t.Errorf("second scene closed with %q, want explicit", st.Scene.CloseReason)
	}

	md, err := s.cl.Transcript(context.Background(), th, "md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "**BOB:** bob says line 1.") || strings.Contains(string(md), "SECRET") {
		t.Errorf("transcript:\n%s", md)
	}
}

// TestSceneCorrectionThenErrorClose: output without tags gets one
// correction run; a second malformed answer closes the scene (error).
func TestSceneCorrectionThenErrorClose(t *testing.T) {
	t.Parallel()
	s, th := sceneStack(t, nil)
	s.startScene(th, map[string]any{"briefs": map[string]string{"alice": "fake:raw=1", "bob": "fake:broken=2"}})
	evs := s.waitSceneClosed(th, 2)
	sp := speeches(evs)
	if len(sp) != 1 {
		t.Fatalf("speeches: %+v, want alice's corrected one only", sp)
	}
	if m, _ := agentbridge.SceneMetaOf(sp[0]); !m.Corrected {
		t.Errorf("alice's speech is not marked corrected: %+v", sp[0].Meta)
	}
	closed := ofType(evs, agentbridge.TypeSceneClosed)
	if len(closed) != 1 || closed[0].Text() != agentbridge.CloseError {
		t.Fatalf("scene.closed: %+v", closed)
	}
	var notice bool
	for _, e := range evs {
		if e.From == s.cfg.CoordinatorID && e.Meta.HasTag("error") && strings.Contains(e.Text(), "bob") {
			notice = true
		}
	}
	if !notice {
		t.Error("no error notice about bob")
	}
	var nudged bool
	for _, p := range s.payloadsOf("alice-corr") {
		nudged = strings.HasPrefix(p.Scene.Nudge, agentbridge.CorrectionPrompt) && strings.Contains(p.Scene.Nudge, "alice says line 1.")
	}
	if !nudged {
		t.Error("alice's correction run did not get the correction prompt with her answer")
	}
	st, _, _ := s.cl.State(context.Background(), th, 0)
	if st.Scene.Corrections != 1 {
		t.Errorf("corrections = %d, want 1", st.Scene.Corrections)
	}
}

// TestSceneCapsAndOff: past the soft cap the payload carries the nudge;
// the hard cap closes the scene; the off control closes a running one.
func TestSceneCapsAndOff(t *testing.T) {
	t.Parallel()
	s, th := sceneStack(t, nil)
	s.startScene(th, map[string]any{"soft_cap": 1, "hard_cap": 2})
	evs := s.waitSceneClosed(th, 2)
	if n := len(speeches(evs)); n != 3 {
		t.Fatalf("%d speeches, want 3 (alice's second reaches the hard cap)", n)
	}
	closed := ofType(evs, agentbridge.TypeSceneClosed)
	if len(closed) != 1 || closed[0].Text() != agentbridge.CloseHardCap {
		t.Fatalf("scene.closed: %+v", closed)
	}
	for _, p := range s.payloadsOf("alice") {
		want := ""
		switch {
		case p.Scene.Step == agentbridge.SceneStepJournal:
			want = agentbridge.JournalPrompt
		case p.Scene.Turn == 3:
			want = agentbridge.SoftCapPrompt
		}
		if p.Scene.Nudge != want {
			t.Errorf("alice's nudge at turn %d (%s) = %q, want %q", p.Scene.Turn, p.Scene.Step, p.Scene.Nudge, want)
		}
	}

	th2 := s.thread("off")
	for _, id := range []string{"alice", "bob"} {
		s.invite(th2, id, agentbridge.Profile{})
	}
	s.startScene(th2, map[string]any{"briefs": map[string]string{"alice": "fake:sleep=300ms", "bob": "fake:sleep=300ms"}})
	testutil.WaitFor(t, waitLong, "a first speech", func() bool { return len(speeches(s.events(th2))) > 0 })
	s.control(th2, "user", map[string]any{"scene": map[string]any{"on": false}})
	evs = s.waitSceneClosed(th2, 2)
	closed = ofType(evs, agentbridge.TypeSceneClosed)
	if len(closed) != 1 || closed[0].Text() != agentbridge.CloseExplicit {
		t.Fatalf("scene.closed after off: %+v", closed)
	}
}

// TestSceneRefusesUninvitedActors: the bridge refuses a scene whose actors
// are not all invited, naming the key.
func TestSceneRefusesUninvitedActors(t *testing.T) {
	t.Parallel()
	s, th := sceneStack(t, nil)
	b, _ := json.Marshal(map[string]any{"scene": map[string]any{"on": true, "actors": []string{"alice", "zed"}}})
	_, err := s.cl.Append(context.Background(), th, agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user", Content: b}, "")
	var ae *agentbridge.Error
	if !errors.As(err, &ae) || ae.Code != agentbridge.ECodeInvalidControl || ae.Field != "content.scene.actors" {
		t.Fatalf("err = %v", err)
	}
	if st, _, _ := s.cl.State(context.Background(), th, 0); st.Scene != nil {
		t.Fatalf("a refused scene changed the state: %+v", st.Scene)
	}
}
