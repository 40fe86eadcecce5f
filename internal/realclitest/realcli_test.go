package realclitest

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// replyTimeout bounds one turn of a real CLI against the instant fake
// (about a second; generous for a loaded CI machine).
const replyTimeout = 60 * time.Second

// Three turns of one conversation with each CLI: every turn is answered,
// turns two and three resume the CLI's session (the model's request holds
// turn one), and each run books what the fake served for it — three equal
// figures for three equal calls — with /metrics equal to their sum
// (contract 6.1).
func TestThreeTurnsResumeAndBookWhatWasServed(t *testing.T) {
	t.Parallel()
	eachCLI(t, func(t *testing.T, s *stack, a *agent) {
		thread := s.thread("three turns with " + a.id)
		for i, q := range []string{"question one", "question two", "question three"} {
			before := len(a.fake.Requests())
			a.fake.Push(fakemodel.Reply{Text: "answer " + q})
			trig := s.ask(thread, a, q)
			if got := text(s.answer(thread, trig, replyTimeout)); got != "answer "+q {
				t.Fatalf("turn %d: reply %q", i+1, got)
			}
			inv := s.finished(thread, a.id, i+1)
			u := a.fake.ServedSince(before)
			calls := a.fake.CallsSince(before)
			if len(calls) == 0 {
				t.Fatalf("turn %d: no model call", i+1)
			}
			if i > 0 && (!calls[0].Contains("question one") || !calls[0].Contains("answer question one")) {
				t.Errorf("turn %d: the model's request does not hold turn one (the session was not resumed)", i+1)
			}
			if inv.Status != "succeeded" || inv.InputTokens != u.InputTokens+u.CacheReadInputTokens+u.CacheCreationInputTokens || inv.OutputTokens != u.OutputTokens {
				t.Errorf("turn %d: invocation %s %d in / %d out, the fake served %+v", i+1, inv.Status, inv.InputTokens, inv.OutputTokens, u)
			}
		}
		invs := s.invocations(thread, a.id)
		if len(invs) != 3 {
			t.Fatalf("%d invocations, want 3", len(invs))
		}
		var sumIn, sumOut int64
		var sumCost float64
		for i, inv := range invs {
			sumIn, sumOut, sumCost = sumIn+inv.InputTokens, sumOut+inv.OutputTokens, sumCost+inv.CostUSD
			if inv.InputTokens != invs[0].InputTokens || inv.OutputTokens != invs[0].OutputTokens || math.Abs(inv.CostUSD-invs[0].CostUSD) > 1e-9 {
				t.Errorf("run %d booked %d/%d $%g, run 1 %d/%d $%g: equal calls must book equal figures",
					i+1, inv.InputTokens, inv.OutputTokens, inv.CostUSD, invs[0].InputTokens, invs[0].OutputTokens, invs[0].CostUSD)
			}
		}
		if a.cli == "claude" && invs[0].CostUSD <= 0 {
			t.Errorf("claude's run booked no cost")
		}
		total := a.fake.Served()
		if sumIn != total.InputTokens || sumOut != total.OutputTokens {
			t.Errorf("the runs booked %d/%d tokens, the fake served %+v", sumIn, sumOut, total)
		}
		p := `participant="` + a.id + `"`
		if in, out := s.metric("agent_bridge_coordinator_tokens_total", p, `direction="input"`), s.metric("agent_bridge_coordinator_tokens_total", p, `direction="output"`); int64(in) != sumIn || int64(out) != sumOut {
			t.Errorf("/metrics says %v/%v tokens, the runs %d/%d", in, out, sumIn, sumOut)
		}
		if c := s.metric("agent_bridge_coordinator_cost_usd_total", p); math.Abs(c-sumCost) > 1e-9 {
			t.Errorf("/metrics says $%v, the runs $%v", c, sumCost)
		}
		if id, turns := s.sessionOf(thread, a.id); id == "" || turns != 3 {
			t.Errorf("session %q with %d turns, want one session of 3 turns", id, turns)
		}
	})
}

// forgetSessions deletes the CLI's own record of its sessions, as a
// cleared cache or another machine would.
func forgetSessions(t *testing.T, a *agent) {
	t.Helper()
	dirs := []string{filepath.Join(a.home, ".claude", "projects")}
	if a.cli == "codex" {
		dirs = []string{filepath.Join(a.codex, "sessions"), filepath.Join(a.codex, "archived_sessions")}
		if m, _ := filepath.Glob(filepath.Join(a.codex, "*.sqlite*")); len(m) > 0 {
			dirs = append(dirs, m...)
		}
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
}

// A session the CLI no longer knows: the same run replies on a fresh
// session, the coordinator keeps the new id, and the next run resumes it
// (contract 6.1).
func TestLostSessionStartsAfresh(t *testing.T) {
	t.Parallel()
	eachCLI(t, func(t *testing.T, s *stack, a *agent) {
		thread := s.thread("lost session with " + a.id)
		a.fake.Push(fakemodel.Reply{Text: "first answer"})
		if got := text(s.answer(thread, s.ask(thread, a, "first question"), replyTimeout)); got != "first answer" {
			t.Fatalf("turn 1: %q", got)
		}
		s.finished(thread, a.id, 1)
		first, _ := s.sessionOf(thread, a.id)
		forgetSessions(t, a)

		a.fake.Push(fakemodel.Reply{Text: "second answer"})
		ans := s.answer(thread, s.ask(thread, a, "second question"), replyTimeout)
		if text(ans) != "second answer" || hasTag(ans, "error") {
			t.Fatalf("turn 2 after the session was lost: %q (tags %v)", text(ans), ans.Meta.Tags)
		}
		s.finished(thread, a.id, 2)
		second, _ := s.sessionOf(thread, a.id)
		if second == "" || second == first {
			t.Fatalf("session after the lost one %q, first %q: want a new id", second, first)
		}

		before := len(a.fake.Requests())
		a.fake.Push(fakemodel.Reply{Text: "third answer"})
		if got := text(s.answer(thread, s.ask(thread, a, "third question"), replyTimeout)); got != "third answer" {
			t.Fatalf("turn 3: %q", got)
		}
		inv := s.finished(thread, a.id, 3)
		if calls := a.fake.CallsSince(before); len(calls) == 0 || !calls[0].Contains("second answer") {
			t.Errorf("turn 3 did not resume the new session (its request lacks turn two)")
		}
		if id, _ := s.sessionOf(thread, a.id); id != second {
			t.Errorf("turn 3 reported session %q, want %q", id, second)
		}
		if inv.Status != "succeeded" {
			t.Errorf("turn 3: %s", inv.Status)
		}
	})
}

// Cancel of a run waiting on a slow model: the run ends cancelled, one
// notice, no reply, no process left.
func TestCancelStopsTheCLI(t *testing.T) {
	t.Parallel()
	eachCLI(t, func(t *testing.T, s *stack, a *agent) {
		thread := s.thread("cancel " + a.id)
		a.fake.SetDefault(fakemodel.Reply{Text: "too late", Delay: 5 * time.Minute})
		trig := s.ask(thread, a, "take your time")
		testutil.WaitFor(t, replyTimeout, "the CLI to call the model", func() bool { return len(a.fake.Calls()) > 0 })
		inv := s.invocations(thread, a.id)[0]
		req, _ := http.NewRequest(http.MethodPost, s.statusURL+"/invocations/"+strconv.FormatInt(inv.ID, 10)+"/cancel", nil)
		req.Header.Set("Authorization", "Bearer "+s.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("cancel: %s", resp.Status)
		}
		ans := s.answer(thread, trig, 30*time.Second)
		if !hasTag(ans, "cancelled") {
			t.Errorf("answer %q tags %v, want a cancelled notice", text(ans), ans.Meta.Tags)
		}
		inv = s.finished(thread, a.id, 1)
		if inv.Status != "cancelled" {
			t.Errorf("status %s, want cancelled", inv.Status)
		}
		testutil.WaitFor(t, 10*time.Second, "the adapter's process group to end", func() bool { return !testutil.GroupAlive(inv.PGID) })
		if n := len(s.answers(thread, trig.ID)); n != 1 {
			t.Errorf("%d answers to the cancelled trigger, want the one notice", n)
		}
	})
}

// A bad key, a failing model and an exhausted quota surface as one error notice with the
// CLI's own reason, the retries in between as progress with their status
// and attempt (contract 6.1). What keeps the notice within the contract's
// 15 s is the retries' cap, which the progress shows ("attempt 2 of 3");
// the time itself is logged and recorded in docs/adapter-protocol.md, not
// asserted: beside another test run at load 17, a CLI's start alone once
// took the 15 s.
func TestErrorsSurfaceWithinSeconds(t *testing.T) {
	t.Parallel()
	need(t)
	var agents []*agent
	type want struct {
		reason string // in the notice
		retry  string // a progress status
		class  string // the invocation's failure (contract 8.5)
	}
	wants := map[string]want{}
	for _, cli := range []string{"claude", "codex"} {
		bad := newAgent(t, cli+"-badkey", cli)
		bad.key = "sk-wrong"
		down := newAgent(t, cli+"-down", cli)
		down.fake.SetDefault(fakemodel.Reply{Status: 500, Error: "upstream exploded"})
		quota := newAgent(t, cli+"-quota", cli)
		quota.fake.SetDefault(fakemodel.Reply{Status: 429, ErrorType: "insufficient_quota", Error: "You exceeded your current quota, please check your plan and billing details."})
		// Nothing listens at this one's address once the stack runs, and
		// no other test's server may take it (CloseAndRefuse).
		gone := newAgent(t, cli+"-unreachable", cli)
		agents = append(agents, bad, down, quota, gone)
		if cli == "claude" {
			wants[bad.id] = want{"Invalid API key", "retrying after 401 (attempt 2 of 3)", agentbridge.FailureAuth}
			wants[down.id] = want{"upstream exploded", "retrying after 500 (attempt 2 of 3)", agentbridge.FailureUnreachable}
			// claude would retry a 429 for minutes: the run ends at its
			// first retry, which says the limit.
			wants[quota.id] = want{"claude hit a usage limit (HTTP 429 rate_limit)", "retrying after 429 (attempt 2 of 3)", agentbridge.FailureQuota}
			wants[gone.id] = want{"Connection refused", "(attempt 2 of 3)", agentbridge.FailureUnreachable}
		} else {
			wants[bad.id] = want{"401 Unauthorized", "retrying after 401 (attempt 2 of 3)", agentbridge.FailureAuth}
			// codex words every 5xx alike, and does not retry an
			// exhausted quota.
			wants[down.id] = want{"high demand", "(attempt 2 of 3)", agentbridge.FailureUnreachable}
			wants[quota.id] = want{"Quota exceeded", "", agentbridge.FailureQuota}
			wants[gone.id] = want{"Connection failed", "retrying after Connection failed: error sending request (attempt 2 of 3)", agentbridge.FailureUnreachable}
		}
	}
	s := newStack(t, agents...)
	for _, a := range agents {
		if strings.HasSuffix(a.id, "-unreachable") {
			a.fake.CloseAndRefuse(t)
		}
	}
	for _, a := range agents {
		t.Run(a.id, func(t *testing.T) {
			s := s.with(t)
			thread := s.thread("errors " + a.id)
			start := time.Now()
			trig := s.ask(thread, a, "are you there")
			// The deadline only ends a run that would hang: a CLI
			// retrying without a cap would still fail the test here.
			ans := s.answer(thread, trig, 2*time.Minute)
			took := time.Since(start)
			w := wants[a.id]
			if !hasTag(ans, "error") || !strings.Contains(text(ans), w.reason) {
				t.Errorf("after %v: %q (tags %v), want an error notice naming %q", took, text(ans), ans.Meta.Tags, w.reason)
			}
			inv := s.finished(thread, a.id, 1)
			if inv.Failure == nil || inv.Failure.Class != w.class {
				t.Errorf("failure %+v, want class %s", inv.Failure, w.class)
			}
			var statuses []string
			for _, p := range s.progress(inv.ID) {
				statuses = append(statuses, p.Status)
			}
			if !strings.Contains(strings.Join(statuses, "\n"), w.retry) {
				t.Errorf("progress %q lacks %q", statuses, w.retry)
			}
			if n := len(s.answers(thread, trig.ID)); n != 1 {
				t.Errorf("%d answers, want one error notice", n)
			}
			t.Logf("%s: error notice after %v", a.id, took.Round(time.Millisecond))
		})
	}
}

// The real claude and codex, as MCP clients of "agent-bridge mcp", post
// into a thread when the model calls the tool.
func TestMCPClientsPostIntoAThread(t *testing.T) {
	t.Parallel()
	need(t)
	s := newStack(t)
	thread := s.thread("mcp")
	for _, cli := range []string{"claude", "codex"} {
		t.Run(cli, func(t *testing.T) {
			s := s.with(t)
			a := newAgent(t, cli, cli)
			as := cli + "-mcp"
			// The person's token, in the environment the CLI gives its
			// MCP server, as docs/mcp.md says (not in the config).
			a.extras["BRIDGE_TOKEN"] = s.token
			msg := "hello from " + cli + " over MCP"
			a.fake.Push(fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: "mcp__bridge__post", Input: map[string]string{"thread": thread, "content": msg}}},
				fakemodel.Reply{Text: "posted"})
			ctx, cancel := context.WithTimeout(t.Context(), replyTimeout)
			defer cancel()
			var args []string
			if cli == "claude" {
				cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"bridge": map[string]any{
					"command": bin, "args": []string{"mcp", "--as", as}, "env": map[string]string{"BRIDGE_URL": s.bridgeURL}}}})
				path := filepath.Join(a.work, "mcp.json")
				if err := os.WriteFile(path, cfg, 0o644); err != nil {
					t.Fatal(err)
				}
				args = []string{"-p", "--output-format", "stream-json", "--verbose", "--mcp-config", path, "--strict-mcp-config", "--allowedTools", "mcp__bridge__post"}
			} else {
				// docs/mcp.md's table as written, pointed at this
				// stack; --strict-config refuses any key this codex
				// does not know.
				a.writeCodexConfig(t, "\n"+strings.NewReplacer(`"agent-bridge"`, strconv.Quote(bin), "codex-bo", as,
					`"http://127.0.0.1:5111"`, strconv.Quote(s.bridgeURL)).Replace(docsCodexTOML(t)))
				args = []string{"exec", "--strict-config", "--json", "--skip-git-repo-check", "-"}
			}
			cmd := a.command(ctx, t, args...)
			cmd.Stdin = strings.NewReader("post hello")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", cli, err, out)
			}
			evs, err := s.cl.ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, e := range evs {
				found = found || (e.From == as && text(e) == msg)
			}
			if !found {
				t.Errorf("no message %q from %s in the thread; the CLI printed:\n%s", msg, as, out)
			}
		})
	}
}

// argsSet matches an AGENT_BRIDGE_{CLAUDE,CODEX}_ARGS value the docs show.
var argsSet = regexp.MustCompile(`"AGENT_BRIDGE_(CLAUDE|CODEX)_ARGS"\s*:\s*"([^"]*)"`)

// Every flag set the docs and the shipped config show for a CLI is
// accepted by the pinned CLI: each runs one turn through the shipped
// adapter (contract 6.1).
func TestDocumentedFlagsAreAccepted(t *testing.T) {
	t.Parallel()
	need(t)
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"), filepath.Join(root, "coordinator.config.json"))
	sets := map[string]map[string]bool{"claude": {"": true}, "codex": {"": true}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range argsSet.FindAllStringSubmatch(string(b), -1) {
			sets[strings.ToLower(m[1])][m[2]] = true
		}
	}
	if len(sets["claude"]) < 2 || len(sets["codex"]) < 2 {
		t.Fatalf("found %v: the docs show no flag set for a CLI", sets)
	}
	for cli, flagSets := range sets {
		for flags := range flagSets {
			t.Run(cli+"/"+flags, func(t *testing.T) {
				a := newAgent(t, cli, cli)
				a.fake.SetDefault(fakemodel.Reply{Text: "flags ok"})
				a.extras["AGENT_BRIDGE_"+strings.ToUpper(cli)+"_ARGS"] = flags
				ctx, cancel := context.WithTimeout(t.Context(), replyTimeout)
				defer cancel()
				res := a.runAdapter(ctx, t)
				if !res.OK() || strings.TrimSpace(string(res.Stdout)) != "flags ok" {
					t.Errorf("%s with %q: exit %d, reply %q, stderr:\n%s", a.adapter(), flags, res.ExitCode, res.Stdout, res.StderrTail)
				}
			})
		}
	}
}

// The MCP set-up commands of docs/mcp.md are accepted as written.
func TestDocumentedMCPCommandsAreAccepted(t *testing.T) {
	t.Parallel()
	need(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	for cli, args := range map[string][]string{
		"claude": {"mcp", "add", "--transport", "stdio", "--scope", "user", "bridge", "--env", "BRIDGE_URL=http://127.0.0.1:5111", "--", "agent-bridge", "mcp", "--as", "claude-ana"},
		"codex":  {"mcp", "add", "bridge", "--env", "BRIDGE_URL=http://127.0.0.1:5111", "--", "agent-bridge", "mcp", "--as", "codex-bo"},
	} {
		t.Run(cli, func(t *testing.T) {
			shown := cli + " " + strings.Join(args, " ")
			flat := strings.Join(strings.Fields(strings.NewReplacer("\\\n", " ", "`", " ").Replace(string(doc))), " ")
			if !strings.Contains(flat, shown) {
				t.Fatalf("docs/mcp.md no longer shows %q: update this test with what it shows", shown)
			}
			a := newAgent(t, cli, cli)
			ctx, cancel := context.WithTimeout(t.Context(), replyTimeout)
			defer cancel()
			if out, err := a.command(ctx, t, args...).CombinedOutput(); err != nil {
				t.Errorf("%s: %v\n%s", shown, err, out)
			}
		})
	}
}

// docsCodexTOML is the codex MCP server table docs/mcp.md shows.
func docsCodexTOML(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```toml\n(\\[mcp_servers\\.bridge\\].*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/mcp.md shows no [mcp_servers.bridge] table")
	}
	return string(m[1])
}

// The CLIs under test are the versions .ci/clis/package.json pins (the
// fixtures and docs describe those).
func TestCLIsAreThePinnedVersions(t *testing.T) {
	t.Parallel()
	need(t)
	b, err := os.ReadFile(filepath.Join(root, ".ci", "clis", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil {
		t.Fatal(err)
	}
	for cli, npmName := range map[string]string{"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex"} {
		pin := pkg.Dependencies[npmName]
		if pin == "" {
			t.Fatalf("package.json pins no %s", npmName)
		}
		a := newAgent(t, cli, cli)
		ctx, cancel := context.WithTimeout(t.Context(), replyTimeout)
		out, err := a.command(ctx, t, "--version").Output()
		cancel()
		if err != nil {
			t.Fatalf("%s --version: %v", cli, err)
		}
		if !regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(pin) + `(\s|$)`).Match(out) {
			t.Errorf("%s --version says %q; .ci/clis/package.json pins %s %s (%s=%s)", cli, strings.TrimSpace(string(out)), npmName, pin, envCLIBin, cliDir)
		}
	}
}
