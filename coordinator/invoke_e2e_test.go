package coordinator_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestBusyParticipantQueuesInOrder: a participant busy with one trigger
// queues the next ones and answers them in trigger order, one at a time.
func TestBusyParticipantQueuesInOrder(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("queue")
	s.invite(th, "alice", agentbridge.Profile{})
	var triggers []agentbridge.Event
	triggers = append(triggers, s.say(th, "alice", "first fake:sleep=300ms"))
	for i := 2; i <= 4; i++ {
		triggers = append(triggers, s.say(th, "alice", "message "+strconv.Itoa(i)))
	}
	for _, tr := range triggers {
		s.waitReplies(th, tr.ID, 1)
	}
	var order []string
	for _, e := range s.events(th) {
		if e.From == "alice" {
			order = append(order, e.Meta.ReplyTo)
		}
	}
	if len(order) != len(triggers) {
		t.Fatalf("got %d replies, want %d", len(order), len(triggers))
	}
	for i, tr := range triggers {
		if order[i] != tr.ID {
			t.Fatalf("reply %d answers %s, want %s (replies out of trigger order)", i, order[i], tr.ID)
		}
	}
	// One at a time: each run started after the previous one finished.
	var prev ledger.Invocation
	for i, tr := range triggers {
		inv := s.waitStatus(tr.ID, "alice", ledger.StatusSucceeded)
		if i > 0 && inv.StartedAt < prev.FinishedAt {
			t.Errorf("run %d started at %s before run %d finished at %s", i, inv.StartedAt, i-1, prev.FinishedAt)
		}
		prev = inv
	}
}

// TestMaxConcurrency: with max_concurrency 1, two participants' runs never
// overlap.
func TestMaxConcurrency(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) { c.MaxConcurrency = 1 })
	th := s.thread("concurrency")
	s.invite(th, "alice", agentbridge.Profile{})
	s.invite(th, "bob", agentbridge.Profile{})
	s.control(th, "user", map[string]any{"invited_auto": map[string]any{"on": true}})
	e := s.say(th, "all", "both of you fake:sleep=200ms")
	s.waitReplies(th, e.ID, 2)
	a := s.waitStatus(e.ID, "alice", ledger.StatusSucceeded)
	b := s.waitStatus(e.ID, "bob", ledger.StatusSucceeded)
	first, second := a, b
	if b.StartedAt < a.StartedAt {
		first, second = b, a
	}
	if second.StartedAt < first.FinishedAt {
		t.Errorf("runs overlap with max_concurrency 1: %s ran %s–%s, %s started %s",
			first.Participant, first.StartedAt, first.FinishedAt, second.Participant, second.StartedAt)
	}
}

// TestRateLimitWaits: over max_invocations_per_minute, a trigger waits in
// the queue (not dropped, not announced) and is recorded interrupted on
// shutdown, to be run by the next start.
func TestRateLimitWaits(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) { c.MaxInvocationsPerMinute = 1 })
	th := s.thread("rate")
	s.invite(th, "alice", agentbridge.Profile{})
	s.invite(th, "bob", agentbridge.Profile{})
	// The second trigger is posted once the first has its reply: posted
	// together, either could take the minute's one slot.
	first := s.say(th, "alice", "one")
	s.waitReplies(th, first.ID, 1)
	second := s.say(th, "bob", "two")
	inv := s.waitStatus(second.ID, "bob", ledger.StatusQueued)
	if got := s.repliesTo(th, second.ID); len(got) != 0 {
		t.Fatalf("the second trigger was answered within the minute: %+v", got)
	}
	s.stopCoordinator()
	db, err := ledger.Open(context.Background(), filepath.Join(s.dir, "coordinator.db"), "bridge-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	list, err := db.Invocations(context.Background(), ledger.Filter{Thread: th})
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range list {
		if got.ID == inv.ID && got.Status != ledger.StatusInterrupted {
			t.Errorf("queued invocation is %s after shutdown, want interrupted", got.Status)
		}
	}
}

// TestTimeoutKillsGrandchild: an adapter over adapter_timeout_s is killed
// with its whole group, and the coordinator posts one timeout error.
func TestTimeoutKillsGrandchild(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) { c.AdapterTimeout = time.Second })
	th := s.thread("timeout")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "fake:child")
	replies := s.waitReplies(th, e.ID, 1)
	r := replies[0]
	if r.From != "bridge-coordinator" || !r.Meta.HasTag("error") || !strings.Contains(r.Text(), "did not finish") {
		t.Errorf("timeout message = %+v %q", r.Meta, r.Text())
	}
	s.waitStatus(e.ID, "alice", ledger.StatusTimeout)
	b, err := os.ReadFile(filepath.Join(s.fakeDir, e.ID+".child"))
	if err != nil {
		t.Fatalf("grandchild pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, waitLong, "the grandchild to be gone", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || isZombie(pid)
	})
}

// isZombie reports whether pid has exited but not been reaped (its parent,
// the killed adapter, is gone; init reaps it eventually).
func isZombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

// TestHugeOutputTruncated: 10 MB of output gives a reply cut to
// max_reply_chars, and the coordinator's heap stays bounded.
func TestHugeOutputTruncated(t *testing.T) {
	s := startStack(t, func(c *config.Config) { c.MaxReplyChars = 2000 })
	th := s.thread("big")
	s.invite(th, "alice", agentbridge.Profile{})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	e := s.say(th, "alice", "fake:big=10000000")
	r := s.waitReplies(th, e.ID, 1)[0]
	if r.From != "alice" || !strings.HasSuffix(r.Text(), "[truncated]") || len([]rune(r.Text())) > 2000 {
		t.Errorf("reply from %s, %d chars, ends %q", r.From, len([]rune(r.Text())), r.Text()[max(0, len(r.Text())-20):])
	}
	inv := s.waitStatus(e.ID, "alice", ledger.StatusSucceeded)
	if inv.OutputBytes != 10000000 {
		t.Errorf("output_bytes = %d, want 10000000", inv.OutputBytes)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	const bound = 64 << 20
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > bound {
		t.Errorf("heap grew by %d bytes, want at most %d", grew, bound)
	}
}

// TestErrorMessageOnExit: a non-zero exit gives one error message from the
// coordinator naming the code and the stderr tail.
func TestErrorMessageOnExit(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("exit")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "fake:exit=3 fake:stderr=boom_went_the_adapter")
	r := s.waitReplies(th, e.ID, 1)[0]
	if r.From != "bridge-coordinator" || !r.Meta.HasTag("error") || r.To != "all" {
		t.Errorf("error message = from %s to %s meta %+v", r.From, r.To, r.Meta)
	}
	if !strings.Contains(r.Text(), "code 3") || !strings.Contains(r.Text(), "boom went the adapter") {
		t.Errorf("error text %q lacks the exit code or stderr", r.Text())
	}
	inv := s.waitStatus(e.ID, "alice", ledger.StatusFailed)
	if inv.ExitCode == nil || *inv.ExitCode != 3 || inv.ReplyEventID != r.ID {
		t.Errorf("record = exit %v reply %q, want 3 and %s", inv.ExitCode, inv.ReplyEventID, r.ID)
	}
}

// TestRefusedOnMuteDuringRun: a participant muted while its adapter runs
// has its reply refused by the bridge; the record says refused and nothing
// is retried.
func TestRefusedOnMuteDuringRun(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("refused")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "fake:sleep=1s")
	s.waitStatus(e.ID, "alice", ledger.StatusRunning)
	s.waitPresence(th, "alice", agentbridge.PresenceThinking)
	s.control(th, "user", map[string]any{"mute": map[string]any{"targets": []string{"alice"}}})
	inv := s.waitStatus(e.ID, "alice", ledger.StatusRefused)
	if !strings.Contains(inv.Error, "mute") {
		t.Errorf("refusal error %q does not mention the mute", inv.Error)
	}
	if got := s.repliesTo(th, e.ID); len(got) != 0 {
		t.Errorf("replies after refusal: %+v", got)
	}
	s.waitPresence(th, "alice", agentbridge.PresenceListening)
	// The coordinator keeps working.
	s.control(th, "user", map[string]any{"unmute": map[string]any{"targets": []string{"alice"}}})
	again := s.say(th, "alice", "still there?")
	s.waitReplies(th, again.ID, 1)
}

// TestForgedReplyKey: a writer that posts first under the coordinator's
// idempotency key for a run's reply (the key is derived from the trigger
// and the participant, reproduced here) does not become that run's reply:
// the bridge answers the coordinator's post 409 idempotency_conflict, the
// run is recorded failed with the reason, and an error notice tells the
// thread, once.
func TestForgedReplyKey(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("forged")
	s.invite(th, "alice", agentbridge.Profile{})
	e := s.say(th, "alice", "fake:sleep=1s")
	s.waitStatus(e.ID, "alice", ledger.StatusRunning)
	sum := sha256.Sum256([]byte("agent-bridge\x00" + e.ID + "\x00alice"))
	key := "coord-" + hex.EncodeToString(sum[:16])
	forged, err := s.cl.Append(context.Background(), th, agentbridge.EventInput{
		From: "mallory", Content: jsonString("forged reply"), Meta: agentbridge.Meta{ReplyTo: e.ID},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	inv := s.waitStatus(e.ID, "alice", ledger.StatusFailed)
	if inv.ReplyEventID == forged.ID || !strings.Contains(inv.Error, "Idempotency-Key") {
		t.Fatalf("run = reply %q error %q, want not the forged %s and the key's conflict", inv.ReplyEventID, inv.Error, forged.ID)
	}
	replies := s.waitReplies(th, e.ID, 2)
	var notices []agentbridge.Event
	for _, r := range replies {
		if r.From == "bridge-coordinator" && r.Meta.HasTag("error") {
			notices = append(notices, r)
		}
	}
	if len(notices) != 1 || notices[0].ID != inv.ReplyEventID || !strings.Contains(notices[0].Text(), agentbridge.ECodeIdempotencyConflict) {
		t.Fatalf("replies %+v, want one error notice naming idempotency_conflict as the run's reply", replies)
	}
}

// TestLoopGuard: two agents that mention each other with discussion on stop
// at max_agent_hops, with exactly one loop-guard notice.
func TestLoopGuard(t *testing.T) {
	t.Parallel()
	s := startStack(t, func(c *config.Config) { c.MaxAgentHops = 3 })
	th := s.thread("loop")
	s.invite(th, "alice", agentbridge.Profile{})
	s.invite(th, "bob", agentbridge.Profile{})
	s.control(th, "user", map[string]any{"discussion": map[string]any{"on": true}})
	// Sent to alice only, so there is one chain: each reply quotes the
	// mentions, and each agent wakes the other (a self-mention is ignored).
	s.say(th, "alice", "talk to each other, @alice @bob")
	var notices []agentbridge.Event
	testutil.WaitFor(t, waitLong, "a loop-guard notice", func() bool {
		notices = nil
		for _, e := range s.events(th) {
			if e.Meta.HasTag("loop-guard") {
				notices = append(notices, e)
			}
		}
		return len(notices) > 0
	})
	n := notices[0]
	d := s.decision(n.Meta.ReplyTo)
	if !d.LoopGuard || len(d.Invoke) != 0 {
		t.Errorf("decision of the stopped trigger = %+v", d)
	}
	// Every invocation the conversation caused has finished, so nothing
	// more can come: count the notices once all records are final.
	testutil.WaitFor(t, waitLong, "all invocations to finish", func() bool {
		list, err := s.db.Invocations(context.Background(), ledger.Filter{Thread: th, Limit: 1000})
		if err != nil {
			return false
		}
		for _, inv := range list {
			if inv.Status == ledger.StatusQueued || inv.Status == ledger.StatusRunning || inv.ReplyEventID == "" {
				return false
			}
		}
		return true
	})
	count := 0
	for _, e := range s.events(th) {
		if e.Meta.HasTag("loop-guard") {
			count++
		}
	}
	if count != 1 {
		t.Errorf("%d loop-guard notices, want exactly 1", count)
	}
}

// TestHotReloadAddsAgent: an agent added to the config file is used
// without a restart.
func TestHotReloadAddsAgent(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	path := filepath.Join(s.dir, "coordinator.config.json")
	write := func(agents string) {
		t.Helper()
		body := `{"bridge_url": "` + s.bridge.URL() + `", "status_addr": "127.0.0.1:0", "startup_mode": "resume", "agents": {` + agents + `}}`
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write(`"alice": {"command": ["` + fakePath + `"]}`)
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("load config: %v", err)
	}
	s.cfg, s.cfgPath = cfg, path
	s.startCoordinator()
	th := s.thread("reload")
	s.invite(th, "dave", agentbridge.Profile{})
	before := s.say(th, "dave", "hello?")
	if d := s.decision(before.ID); skipped(d.Skipped)["dave"] != rules.ReasonNoAdapter {
		t.Fatalf("before the reload: decision %+v, want dave skipped for no adapter", d)
	}
	write(`"alice": {"command": ["` + fakePath + `"]}, "dave": {"command": ["` + fakePath + `"]}`)
	testutil.WaitFor(t, waitLong, "the new config to apply", func() bool {
		_, ok := s.coord.Config().Agents["dave"]
		return ok
	})
	after := s.say(th, "dave", "hello now")
	if r := s.waitReplies(th, after.ID, 1)[0]; r.From != "dave" {
		t.Errorf("reply from %s, want dave", r.From)
	}
}
