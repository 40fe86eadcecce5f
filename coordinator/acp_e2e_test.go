package coordinator_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/acp"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	kit "github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// ensureFakeACP is the project's fake ACP agent (internal/testkit/fakeacp).
func ensureFakeACP(t testing.TB) string {
	t.Helper()
	return progs.Build(t, kit.FakeACP)
}

// acpStack is a bridge and a coordinator whose participant "acpy" is the
// fake ACP agent, invited in a new thread.
type acpStack struct {
	*stack
	thread string
	log    string
	// slow, when set, bounds the wait for a reply or a permission request
	// instead of waitLong: a real agent's cold start (OpenCode's takes
	// most of a minute on a loaded machine).
	slow time.Duration
}

// within is how long to wait for the agent's answer: slow when set, else
// the stack's patience.
func (s *acpStack) within() time.Duration { return cmp.Or(s.slow, s.wait()) }

func startACPStack(t testing.TB, env map[string]string, mutate func(*config.Config)) *acpStack {
	t.Helper()
	bin := ensureFakeACP(t)
	var log string
	s := startStack(t, func(cfg *config.Config) {
		log = filepath.Join(t.TempDir(), "calls.log")
		e := map[string]string{"FAKE_ACP_LOG": log}
		for k, v := range env {
			e[k] = v
		}
		cfg.Agents["acpy"] = config.Agent{ACP: []string{bin}, Env: e, Workdir: filepath.Join(t.TempDir(), "work"),
			Permissions: config.PermissionsAsk}
		if mutate != nil {
			mutate(cfg)
		}
	})
	as := &acpStack{stack: s, log: log}
	as.thread = s.thread("acp")
	s.invite(as.thread, "acpy", agentbridge.Profile{Client: "fake-acp"})
	return as
}

// ask posts text to acpy and returns the trigger.
func (s *acpStack) ask(text string) agentbridge.Event {
	s.t.Helper()
	return s.say(s.thread, "acpy", text)
}

// reply waits for acpy's reply (or an error notice) to trigger.
func (s *acpStack) reply(trigger agentbridge.Event) agentbridge.Event {
	s.t.Helper()
	var got []agentbridge.Event
	testutil.WaitFor(s.t, s.within(), "a reply to "+trigger.ID, func() bool {
		got = s.repliesTo(s.thread, trigger.ID)
		return len(got) > 0
	})
	return got[0]
}

// calls returns the fake's logged calls: "pid method session" lines.
func (s *acpStack) calls() []string {
	b, _ := os.ReadFile(s.log)
	return strings.Fields(strings.ReplaceAll(string(b), " ", "|"))
}

func (s *acpStack) count(method string) int {
	n := 0
	for _, c := range s.calls() {
		if strings.Split(c, "|")[1] == method {
			n++
		}
	}
	return n
}

var replyPattern = regexp.MustCompile(`^fake-acp pid=(\d+) session=(\S+) turn=(\d+) (\S+): (.*)$`)

func parseReply(t testing.TB, e agentbridge.Event) (pid int, session string, turn int, mode, text string) {
	t.Helper()
	m := replyPattern.FindStringSubmatch(e.Text())
	if m == nil {
		t.Fatalf("reply %q from %s is not the fake's", e.Text(), e.From)
	}
	pid, _ = strconv.Atoi(m[1])
	turn, _ = strconv.Atoi(m[3])
	return pid, m[2], turn, m[4], m[5]
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestACPWarmTurns: the first trigger starts the agent, initializes it and
// opens a session; the second is a session/prompt on the same process and
// session, holding only what is new.
func TestACPWarmTurns(t *testing.T) {
	s := startACPStack(t, nil, nil)
	first := s.ask("hello there")
	r1 := s.reply(first)
	pid1, sess1, turn1, mode1, text1 := parseReply(t, r1)
	if r1.From != "acpy" || turn1 != 1 || text1 != "user -> acpy: hello there" || !strings.HasSuffix(mode1, "+roster") {
		t.Fatalf("first reply = %q from %s", r1.Text(), r1.From)
	}
	inv := s.waitStatus(first.ID, "acpy", ledger.StatusSucceeded)
	if inv.PID != pid1 || inv.ReplyEventID != r1.ID {
		t.Errorf("invocation = pid %d reply %s, want pid %d reply %s", inv.PID, inv.ReplyEventID, pid1, r1.ID)
	}
	s.say(s.thread, "all", "a side remark")
	second := s.ask("and again")
	pid2, sess2, turn2, mode2, _ := parseReply(t, s.reply(second))
	if pid2 != pid1 || sess2 != sess1 || turn2 != 2 {
		t.Errorf("second turn on pid %d session %s turn %d, want pid %d session %s turn 2", pid2, sess2, turn2, pid1, sess1)
	}
	if mode2 != "resumed" {
		t.Errorf("second prompt was %s, want resumed (only what is new, no roster)", mode2)
	}
	// Who is invited changed: the roster is sent again.
	s.invite(s.thread, "alice", agentbridge.Profile{})
	if _, _, _, mode3, _ := parseReply(t, s.reply(s.ask("who is here?"))); !strings.HasSuffix(mode3, "+roster") {
		t.Errorf("after an invite the prompt was %s, want the roster again", mode3)
	}
	if n := s.count("initialize"); n != 1 {
		t.Errorf("initialize called %d times, want 1", n)
	}
	if n := s.count("session/new"); n != 1 {
		t.Errorf("session/new called %d times, want 1", n)
	}
	s.waitPresence(s.thread, "acpy", agentbridge.PresenceListening)
	testutil.WaitFor(t, waitLong, "the receipt of the first turn", func() bool {
		rs, err := s.cl.Receipts(context.Background(), agentbridge.ReceiptsQuery{Thread: s.thread, Event: first.ID})
		return err == nil && len(rs) == 1 && rs[0].State == "succeeded" && rs[0].Reply == r1.ID
	})
	resp, err := http.Get(s.coord.StatusURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), "agent_bridge_coordinator_acp_warm_agents 1\n") {
		t.Errorf("/metrics does not count one warm ACP agent")
	}
}

// TestACPProgressAndUsage: tool calls and plans become progress records
// (status = title, kind = kind) and the running cost total becomes each
// turn's own cost.
func TestACPProgressAndUsage(t *testing.T) {
	s := startACPStack(t, nil, nil)
	for i := range 2 {
		trig := s.ask("TOOL please")
		if got := s.reply(trig).Text(); got != "tools done" {
			t.Fatalf("reply = %q", got)
		}
		inv := s.waitStatus(trig.ID, "acpy", ledger.StatusSucceeded)
		if inv.InputTokens != 100 || inv.OutputTokens != 20 || inv.CostUSD < 0.2499 || inv.CostUSD > 0.2501 {
			t.Errorf("turn %d usage = %d in, %d out, %v USD; want 100, 20, 0.25 (the turn's own)", i+1, inv.InputTokens, inv.OutputTokens, inv.CostUSD)
		}
		recs, _, err := s.db.ProgressOf(context.Background(), inv.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, r.Kind+":"+r.Status)
		}
		joined := strings.Join(got, ",")
		for _, want := range []string{"read:Read notes.txt", "plan:Write the answer"} {
			if !strings.Contains(joined, want) {
				t.Errorf("progress %s lacks %s", joined, want)
			}
		}
	}
}

// TestACPCrashMidTurn: an agent that dies mid-turn gives one error notice
// with its stderr; the next trigger starts a new process.
func TestACPCrashMidTurn(t *testing.T) {
	s := startACPStack(t, nil, nil)
	trig := s.ask("CRASH now")
	r := s.reply(trig)
	if r.From != s.cfg.CoordinatorID || !r.Meta.HasTag("error") || !strings.Contains(r.Text(), "exited during the turn") ||
		!strings.Contains(r.Text(), "crashing on purpose") {
		t.Fatalf("reply = %q from %s, want an error notice with the stderr", r.Text(), r.From)
	}
	inv := s.waitStatus(trig.ID, "acpy", ledger.StatusFailed)
	if !strings.Contains(inv.StderrTail, "crashing on purpose") {
		t.Errorf("stderr tail = %q", inv.StderrTail)
	}
	pid, _, turn, _, _ := parseReply(t, s.reply(s.ask("still there?")))
	if pid == inv.PID || turn != 1 {
		t.Errorf("after a crash: pid %d turn %d, want a new process (not %d) on turn 1", pid, turn, inv.PID)
	}
}

// cancel stops acpy's running invocation of trigger through the status
// API's cancel, as the CLI and the UI's Stop button do.
func (s *acpStack) cancelRunning(trigger agentbridge.Event) ledger.Invocation {
	s.t.Helper()
	inv := s.waitStatus(trigger.ID, "acpy", ledger.StatusRunning)
	if _, err := s.coord.Cancel(context.Background(), inv.ID, "user"); err != nil {
		s.t.Fatalf("cancel: %v", err)
	}
	return inv
}

// TestACPCancel: a cancel sends session/cancel; an agent that answers
// stays warm, one that does not is killed after 5 s.
func TestACPCancel(t *testing.T) {
	s := startACPStack(t, nil, nil)
	slow := s.ask("SLOW one")
	testutil.WaitFor(t, waitLong, "the slow turn to start", func() bool { return s.count("session/prompt") == 1 })
	inv := s.cancelRunning(slow)
	s.waitStatus(slow.ID, "acpy", ledger.StatusCancelled)
	notice := s.reply(slow)
	if !notice.Meta.HasTag("cancelled") {
		t.Errorf("notice = %q, want the cancelled notice", notice.Text())
	}
	testutil.WaitFor(t, waitLong, "session/cancel", func() bool { return s.count("cancel") == 1 })
	pid, _, _, _, _ := parseReply(t, s.reply(s.ask("after the slow one")))
	if pid != inv.PID {
		t.Errorf("an agent that answered the cancel was replaced: pid %d, was %d", pid, inv.PID)
	}

	hang := s.ask("HANG forever")
	testutil.WaitFor(t, waitLong, "the hanging turn to start", func() bool { return s.count("session/prompt") == 3 })
	inv = s.cancelRunning(hang)
	s.waitStatus(hang.ID, "acpy", ledger.StatusCancelled)
	testutil.WaitFor(t, waitLong, "the silent agent to be killed", func() bool { return !alive(inv.PID) })
	if len(s.repliesTo(s.thread, hang.ID)) != 1 {
		t.Errorf("replies to the cancelled turn: %v", s.repliesTo(s.thread, hang.ID))
	}
	pid, _, _, _, _ = parseReply(t, s.reply(s.ask("after the hang")))
	if pid == inv.PID {
		t.Errorf("the killed agent's pid %d answered again", pid)
	}
}

// permissionRequest waits for the permission request of trigger.
func (s *acpStack) permissionRequest(trigger agentbridge.Event) (agentbridge.Event, acp.PermissionMeta) {
	s.t.Helper()
	var req agentbridge.Event
	testutil.WaitFor(s.t, s.within(), "a permission request", func() bool {
		for _, e := range s.repliesTo(s.thread, trigger.ID) {
			if e.Meta.HasTag("permission") {
				req = e
				return true
			}
		}
		return false
	})
	var pm acp.PermissionMeta
	if err := json.Unmarshal(req.Meta.Extra[agentbridge.MetaPermission], &pm); err != nil {
		s.t.Fatalf("meta.permission of %q: %v", req.Text(), err)
	}
	return req, pm
}

// TestACPPermissionAsk: the request goes to the human who started the chain
// with the options; the human's permission control answers it.
func TestACPPermissionAsk(t *testing.T) {
	s := startACPStack(t, nil, nil)
	trig := s.ask("PERMISSION to mkdir")
	req, pm := s.permissionRequest(trig)
	if req.To != "user" || req.From != s.cfg.CoordinatorID || !req.Meta.HasTag("coordinator") {
		t.Errorf("request from %s to %s tags %v", req.From, req.To, req.Meta.Tags)
	}
	if pm.ToolCall.Title != "mkdir demo" || pm.ToolCall.Kind != "execute" || len(pm.Options) != 3 || pm.Options[1].ID != "allow" || pm.Options[1].Kind != "allow_once" {
		t.Errorf("meta.permission = %+v", pm)
	}
	inv := s.waitStatus(trig.ID, "acpy", ledger.StatusRunning)
	if pm.Invocation != inv.ID {
		t.Errorf("meta.permission.invocation = %d, want %d", pm.Invocation, inv.ID)
	}
	// An option the request does not offer is refused by the bridge.
	_, err := s.cl.Append(context.Background(), s.thread, agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user",
		Content: json.RawMessage(`{"permission":{"event":"` + req.ID + `","option":"nope"}}`)}, "")
	var ae *agentbridge.Error
	if !errors.As(err, &ae) || ae.Code != agentbridge.ECodeInvalidControl {
		t.Errorf("an option not offered: %v, want invalid_control", err)
	}
	s.control(s.thread, "user", map[string]any{"permission": map[string]any{"event": req.ID, "option": "allow"}})
	var reply agentbridge.Event
	testutil.WaitFor(t, waitLong, "the reply", func() bool {
		for _, e := range s.repliesTo(s.thread, trig.ID) {
			if e.From == "acpy" {
				reply = e
				return true
			}
		}
		return false
	})
	if reply.Text() != "permission: allow" {
		t.Errorf("reply = %q, want the agent to get allow", reply.Text())
	}
}

// TestACPPermissionThenCancel: a cancel while a request waits answers it
// cancelled, ends the turn cancelled, and says in reply to the request
// that it is withdrawn, to the person it asked.
func TestACPPermissionThenCancel(t *testing.T) {
	s := startACPStack(t, nil, nil)
	trig := s.ask("PERMISSION then cancel")
	req, _ := s.permissionRequest(trig)
	s.cancelRunning(trig)
	s.waitStatus(trig.ID, "acpy", ledger.StatusCancelled)
	for _, e := range s.repliesTo(s.thread, trig.ID) {
		if e.From == "acpy" {
			t.Errorf("a cancelled turn posted %q", e.Text())
		}
	}
	testutil.WaitFor(t, waitLong, "the request's withdrawal notice", func() bool {
		for _, e := range s.repliesTo(s.thread, req.ID) {
			if e.From == s.cfg.CoordinatorID && e.To == req.To && e.Meta.HasTag("permission") && strings.Contains(e.Text(), "withdrawn") {
				return true
			}
		}
		return false
	})
}

// TestACPPermissionModes: allow picks allow_once, deny and a timeout answer
// cancelled (the timeout says so in the thread).
func TestACPPermissionModes(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{config.PermissionsAllow, "permission: allow"},
		{config.PermissionsDeny, "permission: cancelled"},
		{config.PermissionsAsk, "permission: cancelled"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			s := startACPStack(t, nil, func(cfg *config.Config) {
				a := cfg.Agents["acpy"]
				a.Permissions = tc.mode
				cfg.Agents["acpy"] = a
				cfg.PermissionTimeout = 500 * time.Millisecond
			})
			trig := s.ask("PERMISSION please")
			inv := s.waitStatus(trig.ID, "acpy", ledger.StatusSucceeded)
			var reply agentbridge.Event
			for _, e := range s.events(s.thread) {
				if e.ID == inv.ReplyEventID {
					reply = e
				}
			}
			if reply.Text() != tc.want {
				t.Errorf("reply = %q, want %q", reply.Text(), tc.want)
			}
			if tc.mode == config.PermissionsAsk {
				req, _ := s.permissionRequest(trig)
				testutil.WaitFor(t, waitLong, "the timeout notice", func() bool {
					return len(s.repliesTo(s.thread, req.ID)) == 1
				})
			}
		})
	}
}

// TestACPStopReasons: max_tokens and refusal become error notices with the
// reason.
func TestACPStopReasons(t *testing.T) {
	s := startACPStack(t, nil, nil)
	for word, want := range map[string]string{"MAXTOKENS": "max_tokens", "REFUSAL": "refusal"} {
		trig := s.ask(word)
		r := s.reply(trig)
		if r.From != s.cfg.CoordinatorID || !r.Meta.HasTag("error") || !strings.Contains(r.Text(), want) {
			t.Errorf("%s: reply %q from %s", word, r.Text(), r.From)
		}
		s.waitStatus(trig.ID, "acpy", ledger.StatusFailed)
	}
}

// TestACPRestart: after a coordinator restart the session is loaded where
// the agent offers it, and the next reply and progress hold only that
// turn's, whether the agent replays its history before answering the load
// or after (as Gemini CLI does); where the load is refused a new session
// gets the recent context.
func TestACPRestart(t *testing.T) {
	for _, mode := range []string{"replay-before", "replay-after", "refused"} {
		t.Run(mode, func(t *testing.T) {
			env := map[string]string{}
			switch mode {
			case "refused":
				env["FAKE_ACP_REFUSE_LOAD"] = "1"
			case "replay-after":
				env["FAKE_ACP_REPLAY"] = "after"
			}
			refuse := mode == "refused"
			s := startACPStack(t, env, nil)
			pid1, sess1, _, _, _ := parseReply(t, s.reply(s.ask("before the restart")))
			s.stopCoordinator()
			testutil.WaitFor(t, waitLong, "the agent to be closed with the coordinator", func() bool { return !alive(pid1) })
			s.startCoordinator()
			s.say(s.thread, "all", "a side remark")
			trig := s.ask("after the restart")
			pid2, sess2, _, mode, text := parseReply(t, s.reply(trig))
			if pid2 == pid1 {
				t.Fatalf("the same process answered after a restart")
			}
			if text != "user -> acpy: after the restart" {
				t.Errorf("reply text %q, want only this turn's", text)
			}
			if s.count("session/load") != 1 {
				t.Errorf("session/load called %d times, want 1", s.count("session/load"))
			}
			switch {
			case !refuse && (sess2 != sess1 || !strings.HasPrefix(mode, "resumed")):
				t.Errorf("after a load: session %s (%s), want %s resumed", sess2, mode, sess1)
			case refuse && (sess2 == sess1 || !strings.HasPrefix(mode, "fresh")):
				t.Errorf("after a refused load: session %s (%s), want a new session with the context", sess2, mode)
			}
			inv := s.waitStatus(trig.ID, "acpy", ledger.StatusSucceeded)
			recs, _, err := s.db.ProgressOf(context.Background(), inv.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if strings.Contains(r.Status, "Replayed") {
					t.Errorf("the turn's progress holds the replayed %s %q", r.Kind, r.Status)
				}
			}
		})
	}
}

// TestACPStartedAt: an ACP invocation's started_at is its turn's start,
// not its warm process's, read while the turn runs.
func TestACPStartedAt(t *testing.T) {
	s := startACPStack(t, nil, nil)
	s.reply(s.ask("warm up"))
	for _, text := range []string{"SLOW one", "SLOW two"} {
		trig := s.ask(text)
		inv := s.waitStatus(trig.ID, "acpy", ledger.StatusRunning)
		queued, err1 := time.Parse(agentbridge.TimeLayout, inv.QueuedAt)
		started, err2 := time.Parse(agentbridge.TimeLayout, inv.StartedAt)
		if err1 != nil || err2 != nil || started.Before(queued) {
			t.Errorf("%s: running with started_at %q, queued_at %q; want started_at >= queued_at", text, inv.StartedAt, inv.QueuedAt)
		}
		s.cancelRunning(trig)
		s.waitStatus(trig.ID, "acpy", ledger.StatusCancelled)
	}
}

// TestACPQuotaUsage: an agent that reports a turn's tokens only in the
// prompt answer's _meta.quota.token_count (Gemini CLI) gets them booked.
func TestACPQuotaUsage(t *testing.T) {
	s := startACPStack(t, nil, nil)
	trig := s.ask("QUOTA please")
	if got := s.reply(trig).Text(); got != "quota" {
		t.Fatalf("reply = %q", got)
	}
	inv := s.waitStatus(trig.ID, "acpy", ledger.StatusSucceeded)
	if inv.InputTokens != 70 || inv.OutputTokens != 9 {
		t.Errorf("usage = %d in, %d out; want 70, 9 from _meta.quota.token_count", inv.InputTokens, inv.OutputTokens)
	}
}

// TestACPIdleAndCap: an idle agent is closed after acp_idle_s, and past
// acp_max_warm the least recently used one is closed.
func TestACPIdleAndCap(t *testing.T) {
	s := startACPStack(t, nil, func(cfg *config.Config) {
		cfg.ACPIdle = 300 * time.Millisecond
	})
	pid, _, _, _, _ := parseReply(t, s.reply(s.ask("hi")))
	testutil.WaitFor(t, waitLong, "the idle agent to be closed", func() bool { return !alive(pid) })

	c := startACPStack(t, nil, func(cfg *config.Config) { cfg.ACPMaxWarm = 1 })
	pidA, _, _, _, _ := parseReply(t, c.reply(c.ask("in thread A")))
	other := c.stack.thread("B")
	c.invite(other, "acpy", agentbridge.Profile{Client: "fake-acp"})
	trig := c.say(other, "acpy", "in thread B")
	pidB, _, _, _, _ := parseReply(t, c.waitReplies(other, trig.ID, 1)[0])
	if pidB == pidA {
		t.Fatalf("two threads shared one process")
	}
	testutil.WaitFor(t, waitLong, "the least recently used agent to be closed", func() bool { return !alive(pidA) })
	if !alive(pidB) {
		t.Errorf("the agent in use was closed")
	}
}

// TestACPScene: a scene actor that is an ACP agent speaks, and its thought
// chunks become its private thinking.
func TestACPScene(t *testing.T) {
	s := startACPStack(t, nil, nil)
	s.invite(s.thread, "alice", agentbridge.Profile{Client: "fake"})
	s.control(s.thread, "user", map[string]any{"scene": map[string]any{"on": true, "actors": []string{"acpy", "alice"},
		"setting": "a kitchen", "first": "acpy", "soft_cap": 1, "hard_cap": 1}})
	var thinking, speech agentbridge.Event
	testutil.WaitFor(t, waitLong, "acpy's thinking and speech", func() bool {
		for _, e := range s.events(s.thread) {
			if e.From == "acpy" && e.Type == agentbridge.TypeThinking {
				thinking = e
			}
			if e.From == "acpy" && e.Type == agentbridge.TypeMessage {
				speech = e
			}
		}
		return thinking.ID != "" && speech.ID != ""
	})
	if thinking.Text() != "a private thought" || speech.Text() != "A line from the fake." || speech.To != "alice" {
		t.Errorf("thinking %q, speech %q to %s", thinking.Text(), speech.Text(), speech.To)
	}
}

// TestACPFiles: the fs capability is offered only with acp_fs, and then
// reads stay inside the session folder.
func TestACPFiles(t *testing.T) {
	for _, fs := range []bool{false, true} {
		t.Run("acp_fs="+strconv.FormatBool(fs), func(t *testing.T) {
			s := startACPStack(t, nil, func(cfg *config.Config) {
				a := cfg.Agents["acpy"]
				a.ACPFS = fs
				cfg.Agents["acpy"] = a
				if err := os.MkdirAll(a.Workdir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(a.Workdir, "notes.txt"), []byte("inside"), 0o644); err != nil {
					t.Fatal(err)
				}
			})
			want := "fs: refused | refused"
			if fs {
				want = "fs: inside | refused"
			}
			if got := s.reply(s.ask("FS please")).Text(); got != want {
				t.Errorf("reply = %q, want %q", got, want)
			}
		})
	}
}

// TestACPParty: an ACP agent takes part in both party rounds as an adapter
// does, on its one warm process.
func TestACPParty(t *testing.T) {
	s := startACPStack(t, nil, nil)
	s.invite(s.thread, "alice", agentbridge.Profile{})
	s.control(s.thread, "user", map[string]any{"party": map[string]any{"on": true, "agents": []string{"acpy", "alice"}}})
	tr := s.say(s.thread, "all", "what do you both think?")
	s.waitPartyNotice(s.thread, tr.ID)
	rounds := map[int]agentbridge.Event{}
	for _, e := range s.repliesTo(s.thread, tr.ID) {
		if e.From == "acpy" {
			round, _ := partyMetaOf(t, e)
			rounds[round] = e
		}
	}
	if len(rounds) != 2 {
		t.Fatalf("acpy answered rounds %v, want 1 and 2", rounds)
	}
	pid1, sess1, _, _, _ := parseReply(t, rounds[1])
	pid2, sess2, _, _, _ := parseReply(t, rounds[2])
	if pid1 != pid2 || sess1 != sess2 {
		t.Errorf("rounds on pid %d/%d sessions %s/%s, want one warm process and session", pid1, pid2, sess1, sess2)
	}
}

// TestACPCancelColdStart: a turn is running from its agent's start on, so
// a cancel while the agent starts stops it like any running turn.
func TestACPCancelColdStart(t *testing.T) {
	s := startACPStack(t, map[string]string{"FAKE_ACP_INIT_DELAY": "1m"}, nil)
	trig := s.ask("hello")
	inv := s.cancelRunning(trig)
	s.waitStatus(trig.ID, "acpy", ledger.StatusCancelled)
	if n := s.reply(trig); !n.Meta.HasTag("cancelled") {
		t.Errorf("reply = %q, want the cancelled notice", n.Text())
	}
	testutil.WaitFor(t, waitLong, "the starting agent to be stopped", func() bool { return !alive(inv.PID) })
}

// TestACPModel: an invited participant's model reaches an agent that
// offers models through session/set_model, once per session (again on a
// loaded one, and when the profile changes); "default" leaves the
// agent's own.
func TestACPModel(t *testing.T) {
	env := map[string]string{"FAKE_ACP_MODELS": "1"}
	s := startACPStack(t, env, nil)
	s.reply(s.ask("first"))
	s.reply(s.ask("second"))
	if got := s.setModels(); strings.Join(got, ",") != "m1" {
		t.Fatalf("session/set_model calls %v, want one with the profile's model m1", got)
	}
	s.stopCoordinator()
	s.startCoordinator()
	s.reply(s.ask("after the restart"))
	s.invite(s.thread, "acpy", agentbridge.Profile{Client: "fake-acp", Model: "fake-large"})
	s.reply(s.ask("on the large one"))
	if got := s.setModels(); strings.Join(got, ",") != "m1,m1,fake-large" {
		t.Errorf("session/set_model calls %v, want m1 again on the loaded session, then fake-large", got)
	}

	d := startACPStack(t, env, nil)
	d.invite(d.thread, "acpy", agentbridge.Profile{Client: "fake-acp", Model: acp.DefaultModel})
	d.reply(d.ask("with the default"))
	if got := d.setModels(); len(got) != 0 || d.count("session/new") != 1 {
		t.Errorf("session/set_model calls %v with the model %q, want none", got, acp.DefaultModel)
	}
}

// setModels is the models the fake was asked for with session/set_model.
func (s *acpStack) setModels() []string {
	var out []string
	for _, c := range s.calls() {
		if f := strings.Split(c, "|"); f[1] == "session/set_model" {
			out = append(out, f[2])
		}
	}
	return out
}
