package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// withBob adds a second agent, bob, to the env's config.
func (e *coordEnv) withBob(fake string) {
	e.t.Helper()
	b, err := os.ReadFile(e.cfgPath)
	if err != nil {
		e.t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		e.t.Fatal(err)
	}
	cfg["agents"].(map[string]any)["bob"] = map[string]any{"command": []string{fake}}
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(e.cfgPath, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// cli runs the agent-bridge binary and returns its stdout, stderr and exit
// code.
func (e *coordEnv) cli(bin string, args ...string) (string, string, int) {
	e.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "BRIDGE_URL="+e.bridge.URL(), "BRIDGE_TOKEN=")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// invocationFor reads the trigger's record from the status API.
func (e *coordEnv) invocationFor(trigger string) (status.InvocationResponse, bool) {
	var list status.InvocationsResponse
	if (&Main{Getenv: func(string) string { return "" }}).statusGet(context.Background(), e.statusURL, "/invocations", nil, &list) != nil {
		return status.InvocationResponse{}, false
	}
	for _, inv := range list.Invocations {
		if inv.TriggerID == trigger {
			var rec status.InvocationResponse
			err := (&Main{Getenv: func(string) string { return "" }}).statusGet(context.Background(), e.statusURL, "/invocations/"+strconv.FormatInt(inv.ID, 10), nil, &rec)
			return rec, err == nil
		}
	}
	return status.InvocationResponse{}, false
}

// TestCancelRealBinary: `agent-bridge cancel` stops a hanging adapter whose
// grandchild ignores SIGTERM (the whole group is gone within 3 s), drops
// the participant's queued run, posts one notice and no reply, and leaves
// another participant's run alone. invocations show prints the progress.
func TestCancelRealBinary(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	e := newCoordEnv(t, fake)
	e.withBob(fake)
	p := e.startCoordProc(bin)
	th := e.threadWithAlice()
	inv, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": "bob", "profile": map[string]any{"client": "fake", "model": "m"}}})
	if _, err := e.cl.Append(context.Background(), th, agentbridge.EventInput{Type: "control", From: "user", Content: inv}, ""); err != nil {
		t.Fatal(err)
	}
	run := e.say(th, "alice", "fake:progress=2 fake:ignoreterm fake:child")
	queued := e.say(th, "alice", "never runs")
	other := e.say(th, "bob", "fake:sleep=2s fake:say=bob_done")
	childFile := filepath.Join(e.fakeDir, run.ID+".child")
	testutil.WaitFor(t, 30*time.Second, "alice's grandchild", func() bool {
		_, err := os.Stat(childFile)
		return err == nil
	})
	var rec status.InvocationResponse
	testutil.WaitFor(t, 30*time.Second, "alice's run and progress in the ledger", func() bool {
		var ok bool
		rec, ok = e.invocationFor(run.ID)
		return ok && rec.PGID != 0 && len(rec.Progress) == 2
	})
	out, stderr, code := e.cli(bin, "invocations", "show", strconv.FormatInt(rec.ID, 10), "--coordinator-url", e.statusURL)
	if code != 0 || !strings.Contains(out, "step 2") || !strings.Contains(out, "2 in/4 out") || !strings.Contains(out, "running") {
		t.Errorf("invocations show: exit %d\n%s%s", code, out, stderr)
	}

	if out, stderr, code := e.cli(bin, "cancel", th, "alice"); code != 0 {
		t.Fatalf("cancel: exit %d\n%s%s", code, out, stderr)
	}
	cancelled := time.Now()
	testutil.WaitFor(t, 3*time.Second, "alice's whole process group to be gone", func() bool {
		return !testutil.GroupAlive(rec.PGID)
	})
	t.Logf("process group gone %v after the cancel", time.Since(cancelled).Round(time.Millisecond))
	testutil.WaitFor(t, 30*time.Second, "both of alice's runs to be cancelled", func() bool {
		return e.invocationStatus(run.ID) == "cancelled" && e.invocationStatus(queued.ID) == "cancelled"
	})
	testutil.WaitFor(t, 30*time.Second, "bob's reply", func() bool { return len(e.replies(th, other.ID)) == 1 })
	testutil.WaitFor(t, 30*time.Second, "the cancel notice", func() bool { return len(e.replies(th, run.ID)) == 1 })
	// Let bob's run settle the thread, then count.
	testutil.WaitFor(t, 30*time.Second, "bob's record", func() bool { return e.invocationStatus(other.ID) == "succeeded" })
	got := e.replies(th, run.ID)
	if len(got) != 1 || !slices.Contains(got[0].Meta.Tags, "cancelled") || got[0].From == "alice" || got[0].To != agentbridge.ToAll {
		t.Errorf("replies to the cancelled run: %+v", got)
	}
	if n := len(e.replies(th, queued.ID)); n != 0 || e.runs(queued.ID) != 0 {
		t.Errorf("the dropped run: %d replies, %d runs", n, e.runs(queued.ID))
	}
	if got := e.replies(th, other.ID); got[0].From != "bob" || got[0].Text() != "bob done" {
		t.Errorf("bob's reply: %+v", got[0])
	}
	out, stderr, code = e.cli(bin, "invocations", "cancel", strconv.FormatInt(rec.ID, 10), "--coordinator-url", e.statusURL)
	if code != 1 || !strings.Contains(stderr, "not queued or running") {
		t.Errorf("cancel of an ended run: exit %d\n%s%s", code, out, stderr)
	}
	out, _, _ = e.cli(bin, "invocations", "--status", "cancelled", "--coordinator-url", e.statusURL)
	rows := 0 // the STATUS column's; the FAILURE column says cancelled too
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == "cancelled" {
			rows++
		}
	}
	if rows != 2 {
		t.Errorf("invocations --status cancelled:\n%s", out)
	}
	p.Terminate(t)
}

// TestInvocationsFollowAndCancelRace: `invocations show --follow` prints
// progress as it comes and stops when the run ends; then cancels sent as
// runs finish (a bounded number of rounds) never let a cancelled run's
// reply through, with the real binary.
func TestInvocationsFollowAndCancelRace(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	e := newCoordEnv(t, fake)
	p := e.startCoordProc(bin)
	th := e.threadWithAlice()
	run := e.say(th, "alice", "fake:progress=2 fake:sleep=1500ms fake:say=followed")
	var rec status.InvocationResponse
	testutil.WaitFor(t, 30*time.Second, "alice's run in the ledger", func() bool {
		var ok bool
		rec, ok = e.invocationFor(run.ID)
		return ok
	})
	out, stderr, code := e.cli(bin, "invocations", "show", strconv.FormatInt(rec.ID, 10), "--follow", "--coordinator-url", e.statusURL)
	if code != 0 || !strings.Contains(out, "step 2") || !strings.Contains(out, "-- succeeded (exit 0)") || !strings.Contains(out, "2 in/4 out") {
		t.Errorf("show --follow: exit %d\n%s%s", code, out, stderr)
	}
	if strings.Count(out, "step 1") != 1 {
		t.Errorf("a progress line printed twice or not at all:\n%s", out)
	}

	const rounds = 10
	var triggers []agentbridge.Event
	for i := range rounds {
		tr := e.say(th, "alice", fmt.Sprintf("fake:sleep=%dms fake:say=r%d", i*10, i))
		testutil.WaitFor(t, 30*time.Second, "the adapter to start", func() bool { return e.runs(tr.ID) == 1 })
		if _, stderr, code := e.cli(bin, "cancel", th, "alice"); code != 0 {
			t.Fatalf("cancel: %s", stderr)
		}
		testutil.WaitFor(t, 30*time.Second, "the round's outcome", func() bool {
			st := e.invocationStatus(tr.ID)
			return st == "succeeded" && len(e.replies(th, tr.ID)) == 1 || st == "cancelled"
		})
		if e.invocationStatus(tr.ID) == "cancelled" {
			// The notice is the only answer; give a racing reply the
			// time of the next round to show up, then count.
			testutil.WaitFor(t, 30*time.Second, "the cancel notice", func() bool { return len(e.replies(th, tr.ID)) >= 1 })
		}
		triggers = append(triggers, tr)
	}
	var replied int
	for _, tr := range triggers {
		got := e.replies(th, tr.ID)
		cancelled := e.invocationStatus(tr.ID) == "cancelled"
		if len(got) != 1 || (got[0].From == "alice") == cancelled {
			t.Errorf("round %q: cancelled %v, answers %+v", tr.Text(), cancelled, got)
		}
		if !cancelled {
			replied++
		}
	}
	t.Logf("%d of %d rounds replied before the cancel", replied, rounds)
	p.Terminate(t)
}

func TestRunDurationAndPlural(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 21, 0, 30, 0, time.UTC)
	for _, c := range []struct {
		inv  ledger.Invocation
		want string
	}{
		{ledger.Invocation{Status: "queued"}, "-"},
		{ledger.Invocation{Status: "running", StartedAt: "2026-11-23T21:00:17.600000Z"}, "12s"},
		{ledger.Invocation{Status: "succeeded", StartedAt: "2026-11-23T21:00:17.600000Z", FinishedAt: "2026-11-23T21:00:18.000000Z", DurationMS: 400}, "400ms"},
	} {
		if got := runDuration(c.inv, now); got != c.want {
			t.Errorf("runDuration(%s) = %q, want %q", c.inv.Status, got, c.want)
		}
	}
	if got := plural(1, "line") + ", " + plural(0, "line") + ", " + plural(3, "progress record"); got != "1 line, 0 lines, 3 progress records" {
		t.Errorf("plural: %q", got)
	}
}
