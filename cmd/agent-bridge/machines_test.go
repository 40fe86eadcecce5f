package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestTwoMachines runs one `serve` and two `coordinator` processes, each
// with its own HOME, state file, status port and config naming one agent
// (laptop serves alice, server serves bob), as two machines would
// (contract 7.1). Both register with the bridge; direct messages and
// mentions each get exactly one reply from each addressee; no coordinator
// writes a receipt for the other's agent (each once wrote "skipped — no
// adapter" for it, which could replace "succeeded"); `agents` lists both
// coordinators; a second coordinator under the same id is warned about.
//
// It runs with the bridge on a SQLite file and on PostgreSQL, whose
// clock then says who is live.
func TestTwoMachines(t *testing.T) {
	onBothBridges(t, testTwoMachines)
}

func testTwoMachines(t *testing.T, s *stack.Stack) {
	bin, url, person, cl := s.Bin, s.URL(), s.Bridge.Token, s.Person
	ctx := context.Background()
	ms := s.Machines(nil, "laptop=alice", "server=bob")
	laptop, server := ms[0], ms[1]

	list, err := cl.Coordinators(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Coordinators) != 2 || !list.Coordinators[0].Live || !list.Coordinators[1].Live ||
		list.Coordinators[0].Host != "laptop" || list.Coordinators[0].StatusURL != laptop.StatusURL {
		t.Fatalf("GET /coordinators = %+v", list)
	}
	if a, b := list.Agents["alice"], list.Agents["bob"]; len(a) != 1 || a[0] != "laptop" || len(b) != 1 || b[0] != "server" {
		t.Errorf("agents served = %v, want alice by laptop and bob by server", list.Agents)
	}

	th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "two machines"})
	if err != nil {
		t.Fatal(err)
	}
	receipts := stack.FollowReceipts(t, cl, th.ID, 0)
	post := func(in agentbridge.EventInput) agentbridge.Event {
		t.Helper()
		ev, err := cl.Append(ctx, th.ID, in, "")
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	control := func(v any) {
		b, _ := json.Marshal(v)
		post(agentbridge.EventInput{Type: "control", From: "user", Content: b})
	}
	say := func(to, text string) agentbridge.Event {
		b, _ := json.Marshal(text)
		return post(agentbridge.EventInput{From: "user", To: to, Content: b})
	}
	for _, p := range []string{"alice", "bob"} {
		control(map[string]any{"invite": map[string]any{"participant_id": p, "profile": map[string]any{"client": "fake-" + p, "model": "m"}}})
	}

	type want struct {
		trigger agentbridge.Event
		who     []string
	}
	wants := []want{
		{say("alice", "hi alice"), []string{"alice"}},
		{say("bob", "hi bob"), []string{"bob"}},
		{say("all", "@alice and @bob, both of you"), []string{"alice", "bob"}},
		{say("all", "only @bob"), []string{"bob"}},
	}
	replies := func(trigger string) map[string]int {
		evs, err := cl.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: th.ID, After: -1})
		if err != nil {
			return nil
		}
		out := map[string]int{}
		for _, ev := range evs {
			if ev.Meta.ReplyTo == trigger {
				out[ev.From]++
			}
		}
		return out
	}
	for _, w := range wants {
		testutil.WaitFor(t, 30*time.Second, "the replies to "+w.trigger.ID, func() bool {
			got := replies(w.trigger.ID)
			for _, p := range w.who {
				if got[p] == 0 {
					return false
				}
			}
			return true
		})
		for _, p := range w.who {
			testutil.WaitFor(t, 30*time.Second, p+"'s receipt to say succeeded", func() bool {
				rs := receipts.Of(w.trigger.ID, p)
				return len(rs) > 0 && rs[len(rs)-1].State == agentbridge.ReceiptSucceeded
			})
		}
	}

	// A sentinel that each coordinator does report (its own agent muted)
	// comes after every decision above in its reporter's order: once both
	// are in, nothing about the triggers above is still to come.
	control(map[string]any{"mute": map[string]any{"targets": []string{"alice", "bob"}}})
	sentinel := say("all", "@alice @bob muted")
	for _, p := range []string{"alice", "bob"} {
		testutil.WaitFor(t, 30*time.Second, "the sentinel's receipt for "+p, func() bool {
			rs := receipts.Of(sentinel.ID, p)
			return len(rs) == 1 && rs[0].Reason == "muted"
		})
	}
	for _, w := range wants {
		got := replies(w.trigger.ID)
		total := 0
		for _, p := range w.who {
			if got[p] != 1 {
				t.Errorf("trigger %q: %d replies from %s, want 1 (%v)", w.trigger.Content, got[p], p, got)
			}
			total += got[p]
		}
		if total != len(w.who) {
			t.Errorf("trigger %q: replies %v, want one from each of %v", w.trigger.Content, got, w.who)
		}
		for _, p := range []string{"alice", "bob"} {
			for _, r := range receipts.Of(w.trigger.ID, p) {
				if r.State == agentbridge.ReceiptSkipped {
					t.Errorf("trigger %q: a skipped receipt for %s: %+v", w.trigger.Content, p, r)
				}
			}
		}
	}
	for _, p := range []string{"alice", "bob"} {
		if r := receipts.Of(sentinel.ID, p); len(r) != 1 || r[0].From != map[string]string{"alice": "laptop", "bob": "server"}[p] {
			t.Errorf("the sentinel's receipts for %s: %+v, want one from the coordinator serving it", p, r)
		}
	}

	// Presence says where each agent runs.
	for p, host := range map[string]string{"alice": "laptop", "bob": "server"} {
		testutil.WaitFor(t, 30*time.Second, p+"'s presence @ "+host, func() bool {
			ps, err := cl.Presence(ctx, th.ID)
			if err != nil {
				return false
			}
			for _, pr := range ps {
				var d struct{ Host string }
				if pr.ID == p && json.Unmarshal(pr.Details, &d) == nil && d.Host == host {
					return true
				}
			}
			return false
		})
	}

	// agents lists both live coordinators and what each serves.
	out, errOut, code := runCLI(t, bin, url, person, "agents", "--live")
	if code != 0 || !strings.Contains(out, "Coordinators at "+url+": 2 live") ||
		!strings.Contains(out, "laptop @ laptop, live") || !strings.Contains(out, "server @ server, live") ||
		!strings.Contains(out, "alice        adapter") {
		t.Errorf("agents --live: code %d\n%s%s", code, out, errOut)
	}

	// why, without --coordinator-url, asks every live coordinator the
	// bridge lists: each decided the mention of both.
	out, errOut, code = runCLI(t, bin, url, person, "why", wants[2].trigger.ID)
	if code != 0 || !strings.Contains(out, "coordinator laptop @ laptop ("+laptop.StatusURL+")") ||
		!strings.Contains(out, "coordinator server @ server ("+server.StatusURL+")") ||
		!strings.Contains(out, "  alice (agent alice)") || !strings.Contains(out, "  bob (agent bob)") {
		t.Errorf("why: code %d\n%s%s", code, out, errOut)
	}

	// So does invocations: each coordinator's own runs.
	out, errOut, code = runCLI(t, bin, url, person, "invocations", "--thread", th.ID)
	if code != 0 || !strings.Contains(out, "coordinator laptop @ laptop") || !strings.Contains(out, "coordinator server @ server") ||
		strings.Count(out, " alice ") != 2 || strings.Count(out, " bob ") != 3 {
		t.Errorf("invocations: code %d\n%s%s", code, out, errOut)
	}

	// An invite of a participant no registered coordinator serves is said
	// once, at the invite; one that is served is not.
	if _, errOut, code := runCLI(t, bin, url, person, "invite", th.ID, "carol", "--client", "fake-carol", "--model", "m"); code != 0 ||
		!strings.Contains(errOut, "no coordinator registered with the bridge serves carol") {
		t.Errorf("invite carol: code %d, stderr %q", code, errOut)
	}
	if _, errOut, code := runCLI(t, bin, url, person, "invite", th.ID, "alice", "--client", "fake-alice", "--model", "m2"); code != 0 || errOut != "" {
		t.Errorf("invite alice again: code %d, stderr %q", code, errOut)
	}

	// A second coordinator under the laptop's id: both warn.
	twin := s.Machine("laptop", "alice")
	twin.Start()
	for _, m := range []*stack.Machine{laptop, twin} {
		testutil.WaitFor(t, 30*time.Second, "a duplicate warning from "+m.StatusURL, func() bool {
			return strings.Contains(m.Proc.Stderr.String(), "another coordinator is running under the same coordinator_id")
		})
	}
	twin.Proc.Terminate(t)
	laptop.Proc.Terminate(t)
	server.Proc.Terminate(t)
	// A coordinator that stops removes its registration.
	if list, err := cl.Coordinators(ctx); err != nil || len(list.Coordinators) != 0 {
		t.Errorf("after every coordinator stopped: %+v %v, want no registration left", list, err)
	}
}

// runCLI runs the agent-bridge binary against the bridge at url.
func runCLI(t *testing.T, bin, url, token string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "BRIDGE_URL="+url, "BRIDGE_TOKEN="+token, "HOME="+t.TempDir())
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// TestReloadRegistersNewAgents: a coordinator holding a coordinator token
// (which writes only as the agents its registration lists) registers an
// agent added to its config by a reload at once, not at its next
// heartbeat (claim_ttl_s 600: minutes away), and the new agent's reply is
// accepted.
func TestReloadRegistersNewAgents(t *testing.T) {
	stack.Heavy(t)
	s := stack.New(t, bins, "")
	cl := s.Person
	ctx := context.Background()
	m := s.Machine("solo", "alice")
	// claim_ttl_s 600 puts the next heartbeat minutes away.
	m.Set("claim_ttl_s", 600)
	m.Start()
	m.Set("agents", stack.FakeAgents(s.Fake, "alice", "bob"))
	testutil.WaitFor(t, 30*time.Second, "bob registered by the reload", func() bool {
		list, err := cl.Coordinators(ctx)
		return err == nil && len(list.Agents["bob"]) == 1
	})
	th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "reload"})
	if err != nil {
		t.Fatal(err)
	}
	inv, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": "bob", "profile": map[string]any{"client": "fake-bob", "model": "m"}}})
	if _, err := cl.Append(ctx, th.ID, agentbridge.EventInput{Type: "control", From: "user", Content: inv}, ""); err != nil {
		t.Fatal(err)
	}
	hi, _ := json.Marshal("hi bob")
	trig, err := cl.Append(ctx, th.ID, agentbridge.EventInput{From: "user", To: "bob", Content: hi}, "")
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "bob's reply", func() bool {
		evs, err := cl.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: th.ID, After: -1})
		if err != nil {
			return false
		}
		for _, e := range evs {
			if e.From == "bob" && e.Meta.ReplyTo == trig.ID {
				return true
			}
		}
		return false
	})
}
