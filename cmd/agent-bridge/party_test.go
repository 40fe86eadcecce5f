package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// partyEnv is a coordEnv whose config has the agents alice and bob, and a
// thread in party mode with both invited.
func partyEnv(t *testing.T, fake string) (*coordEnv, string) {
	t.Helper()
	e := newCoordEnv(t, fake)
	var cfg map[string]any
	b, err := os.ReadFile(e.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["agents"] = map[string]any{"alice": map[string]any{"command": []string{fake}}, "bob": map[string]any{"command": []string{fake}}}
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(e.cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	th, err := e.cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "party"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{
		`{"invite":{"participant_id":"alice","profile":{"client":"fake","model":"m","expertise":["databases"]}}}`,
		`{"invite":{"participant_id":"bob","profile":{"client":"fake","model":"m","roles":["gopher"]}}}`,
		`{"party":{"on":true}}`,
	} {
		if _, err := e.cl.Append(ctx, th.ID, agentbridge.EventInput{Type: "control", From: "user", Content: json.RawMessage(c)}, ""); err != nil {
			t.Fatal(err)
		}
	}
	return e, th.ID
}

// partyRuns counts the fake's runs of (trigger, participant) in a round.
func (e *coordEnv) partyRuns(trigger, participant string, round int) int {
	b, _ := os.ReadFile(filepath.Join(e.fakeDir, "runs.log"))
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == trigger && f[1] == participant && f[3] == fmt.Sprint(round) {
			n++
		}
	}
	return n
}

// partyTally counts the replies and error messages of each (agent, round)
// answering trigger, and the party notices.
func (e *coordEnv) partyTally(thread, trigger string) (map[string]int, int) {
	tally := map[string]int{}
	notices := 0
	for _, ev := range e.replies(thread, trigger) {
		if ev.Meta.HasTag("party") {
			notices++
			continue
		}
		var pm struct{ Round int }
		_ = json.Unmarshal(ev.Meta.Extra["party"], &pm)
		who := ev.From
		if ev.Meta.HasTag("error") {
			_ = json.Unmarshal(ev.Meta.Extra["participant"], &who)
		}
		tally[fmt.Sprintf("%s/%d", who, pm.Round)]++
	}
	return tally, notices
}

// TestPartyKill9ExactlyOnce kills the coordinator with SIGKILL in the
// middle of round 1 of one trigger and of round 2 of another: after each
// restart every (trigger, agent, round) ends with exactly one reply, round
// 2 happens once, and one notice closes each round.
func TestPartyKill9ExactlyOnce(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	e, th := partyEnv(t, fake)
	for _, round := range []int{1, 2} {
		p := e.startCoordProc(bin)
		trig := e.say(th, "all", fmt.Sprintf("databases in go? fake@alice/%d:sleep=3s fake@bob/%d:sleep=3s", round, round))
		testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("round %d to start", round), func() bool {
			return e.partyRuns(trig.ID, "alice", round) == 1 && e.partyRuns(trig.ID, "bob", round) == 1
		})
		if err := p.Cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		p.Wait(t)
		// The killed adapters' groups are killed by the restarted
		// coordinator; until then they may still be sleeping.
		p2 := e.startCoordProc(bin)
		testutil.WaitFor(t, 60*time.Second, "the round's notice", func() bool {
			_, n := e.partyTally(th, trig.ID)
			return n >= 1
		})
		tally, notices := e.partyTally(th, trig.ID)
		want := map[string]int{"alice/1": 1, "bob/1": 1, "alice/2": 1, "bob/2": 1}
		if fmt.Sprint(tally) != fmt.Sprint(want) || notices != 1 {
			t.Errorf("killed in round %d: replies per agent/round = %v and %d notices; want %v and 1", round, tally, notices, want)
		}
		for _, who := range []string{"alice", "bob"} {
			if n := e.partyRuns(trig.ID, who, 3-round); n != 1 {
				t.Errorf("killed in round %d: %s ran %d times in round %d, want 1", round, who, n, 3-round)
			}
		}
		p2.Terminate(t)
	}
}

// TestPartyCommand: `agent-bridge party` posts the control, refuses bad
// flags with exit 2, and the bridge's refusal of an unknown agent is
// printed; `state` shows the party and `why` the selection.
func TestPartyCommand(t *testing.T) {
	fake := buildFake(t)
	e, th := partyEnv(t, fake)
	t.Setenv("FAKE_ADAPTER_DIR", e.fakeDir)
	run := func(args ...string) (string, int) {
		var out, errb bytes.Buffer
		cm := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
		code := exitCode(&errb, cm.Run(context.Background(), args))
		return out.String() + errb.String(), code
	}
	url := "--url=" + e.bridge.URL()
	if out, code := run("party", th, "on", "--agents", "alice,bob", "--max-agents", "1", "--no-cross-talk", url); code != 0 {
		t.Fatalf("party on = %d:\n%s", code, out)
	}
	out, code := run("state", th, url)
	if code != 0 || !strings.Contains(out, "party:        on (up to 1 of alice, bob, without reactions)") || !strings.Contains(out, "expertise=databases") {
		t.Errorf("state = %d:\n%s", code, out)
	}
	for _, bad := range [][]string{{"party", th, "maybe"}, {"party", th, "on", "--max-agents", "0"}, {"party", th}} {
		if out, code := run(append(bad, url)...); code != 2 {
			t.Errorf("%q = %d, want 2:\n%s", bad, code, out)
		}
	}
	if out, code := run("party", th, "on", "--agents", "alice,ghost", url); code != 1 || !strings.Contains(out, "ghost") {
		t.Errorf("party with an unknown agent = %d:\n%s", code, out)
	}

	var stderr testutil.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &bytes.Buffer{}, Stderr: &stderr, Getenv: func(string) string { return "" }}
	runInProcess(t, m, "coordinator", "--config", e.cfgPath, "--state", e.statePath)
	testutil.WaitFor(t, 30*time.Second, "the coordinator to follow the log", func() bool {
		resp, err := http.Get(e.statusURL + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Following bool }
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Following
	})
	trig := e.say(th, "all", "which databases?")
	testutil.WaitFor(t, 30*time.Second, "the party notice", func() bool {
		_, n := e.partyTally(th, trig.ID)
		return n == 1
	})
	out, code = run("why", trig.ID, "--coordinator-url", e.statusURL)
	for _, want := range []string{"rule: party", "party selected (in order):", "alice: matched words (database); rank 1; 0 party turns before",
		"party not selected:", "bob: max_agents reached; rank 2"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("why = %d, missing %q:\n%s", code, want, out)
		}
	}
	if out, code := run("party", th, "off", url); code != 0 {
		t.Fatalf("party off = %d:\n%s", code, out)
	}
	if out, _ := run("state", th, url); !strings.Contains(out, "party:        off") {
		t.Errorf("state after off:\n%s", out)
	}
}
