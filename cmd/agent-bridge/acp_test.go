package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestACPKill9 kills the coordinator with SIGKILL during an ACP agent's
// turn: the agent dies with it (parent-death signal), the restarted
// coordinator re-runs the turn on a new agent process and posts exactly
// one reply, and SIGTERM then closes the warm agent and exits 0.
func TestACPKill9(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	fakeACP := bins.Build(t, stack.FakeACP)
	e := newCoordEnv(t, fake)
	log := filepath.Join(e.dir, "acp-calls.log")
	setConfig(t, e.cfgPath, "agents", map[string]any{"alice": map[string]any{"acp": []string{fakeACP}, "env": map[string]string{"FAKE_ACP_LOG": log},
		"workdir": filepath.Join(e.dir, "work")}})
	// prompts returns the pids of the processes that got a session/prompt.
	prompts := func() []int {
		raw, _ := os.ReadFile(log)
		var pids []int
		for _, line := range strings.Split(string(raw), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[1] == "session/prompt" {
				pid, _ := strconv.Atoi(f[0])
				pids = append(pids, pid)
			}
		}
		return pids
	}
	alive := func(pid int) bool { return syscall.Kill(pid, 0) == nil }

	p := e.startCoordProc(bin)
	th := e.threadWithAlice()
	trig := e.say(th, "alice", "FIRSTSLOW please")
	testutil.WaitFor(t, 30*time.Second, "the agent's first prompt", func() bool { return len(prompts()) == 1 })
	first := prompts()[0]
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Wait(t)
	testutil.WaitFor(t, 30*time.Second, "the agent to die with the coordinator", func() bool { return !alive(first) })

	p2 := e.startCoordProc(bin)
	testutil.WaitFor(t, 30*time.Second, "the re-run's reply", func() bool { return len(e.replies(th, trig.ID)) >= 1 })
	testutil.WaitFor(t, 30*time.Second, "the record to be succeeded", func() bool { return e.invocationStatus(trig.ID) == "succeeded" })
	got := e.replies(th, trig.ID)
	if len(got) != 1 || got[0].From != "alice" {
		t.Fatalf("replies = %+v, want exactly one from alice", got)
	}
	pids := prompts()
	if len(pids) != 2 || pids[1] == first {
		t.Fatalf("prompts went to %v, want the killed agent then a new one", pids)
	}
	p2.Terminate(t)
	testutil.WaitFor(t, 10*time.Second, "the warm agent to be closed with the coordinator", func() bool { return !alive(pids[1]) })
}
