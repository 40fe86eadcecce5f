package main

import (
	"context"
	"encoding/json"
	"os"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestReceiptAfterRestart stops the coordinator while its adapter runs
// (SIGTERM, as Ctrl-C of up does, and SIGKILL), starts it again, and
// requires the receipt of the trigger to end as its last run did:
// succeeded, linking the one reply (contract 6.3). After a graceful stop
// the receipt once stayed interrupted with no reply although the re-run
// succeeded.
func TestReceiptAfterRestart(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	for _, tc := range []struct {
		name string
		stop func(*testing.T, *stack.Proc)
	}{
		{"SIGTERM", func(t *testing.T, p *stack.Proc) {
			if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.Wait(t); code != 0 {
				t.Fatalf("exit code after SIGTERM = %d; stderr:\n%s", code, p.Stderr.String())
			}
		}},
		{"SIGKILL", func(t *testing.T, p *stack.Proc) {
			if err := p.Cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			p.Wait(t)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newCoordEnv(t, fake)
			// A grace shorter than the run, so that SIGTERM interrupts it.
			b, err := os.ReadFile(e.cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			var cfg map[string]any
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
			cfg["shutdown_grace_s"] = 1
			if b, err = json.Marshal(cfg); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(e.cfgPath, b, 0o644); err != nil {
				t.Fatal(err)
			}
			p := e.startCoordProc(bin)
			th := e.threadWithAlice()
			trig := e.startRun(th, "4s")
			tc.stop(t, p)
			if got := e.replies(th, trig.ID); len(got) != 0 {
				t.Fatalf("a reply appeared although the coordinator stopped mid-run: %+v", got)
			}
			p2 := e.startCoordProc(bin)
			testutil.WaitFor(t, 30*time.Second, "the re-run's reply", func() bool { return len(e.replies(th, trig.ID)) >= 1 })
			reply := e.replies(th, trig.ID)[0]
			var last agentbridge.Receipt
			testutil.WaitFor(t, 30*time.Second, "the receipt to say succeeded with the reply", func() bool {
				list, err := e.cl.Receipts(context.Background(), agentbridge.ReceiptsQuery{Thread: th, Event: trig.ID})
				if err != nil || len(list) != 1 {
					return false
				}
				last = list[0]
				return last.State == agentbridge.ReceiptSucceeded && last.Reply == reply.ID
			})
			if got := e.replies(th, trig.ID); len(got) != 1 || got[0].From != "alice" {
				t.Errorf("replies = %+v, want exactly one from alice", got)
			}
			// Nothing moves it back afterwards.
			e.say(th, "alice", "one more")
			testutil.WaitFor(t, 30*time.Second, "the next reply", func() bool { return e.invocationStatus(trig.ID) == "succeeded" })
			list, err := e.cl.Receipts(context.Background(), agentbridge.ReceiptsQuery{Thread: th, Event: trig.ID})
			if err != nil || len(list) != 1 || list[0].State != agentbridge.ReceiptSucceeded || list[0].Reply != reply.ID {
				t.Errorf("receipt later = %+v (%v), want succeeded with %s", list, err, reply.ID)
			}
			p2.Terminate(t)
		})
	}
}
