package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

// machine is one coordinator standing in for a machine: its own HOME,
// config, state file, status port and fake adapter folder.
type machine struct {
	t                  *testing.T
	id, dir, cfgPath   string
	statusURL, fakeDir string
	// state is the --state ledger: the machine's own SQLite file unless
	// set (a PostgreSQL ledger several machines share).
	state string
	proc  *coordProc
}

// newMachine writes the config of coordinator id, host id, serving agents
// (each the fake adapter) against bridgeURL.
func newMachine(t *testing.T, person *client.Client, bridgeURL, fake, id string, agents ...string) *machine {
	t.Helper()
	// Each machine has a coordinator token of its own (contract 7.3).
	tok, err := person.CreateToken(context.Background(), agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: id})
	if err != nil {
		t.Fatalf("coordinator token for %s: %v", id, err)
	}
	dir := t.TempDir()
	m := &machine{t: t, id: id, dir: dir, cfgPath: filepath.Join(dir, "coordinator.config.json"), fakeDir: filepath.Join(dir, "fake")}
	for _, d := range []string{m.fakeDir, filepath.Join(dir, "home")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	addr := testutil.FreeAddr(t)
	m.statusURL = "http://" + addr
	entries := map[string]any{}
	for _, a := range agents {
		entries[a] = map[string]any{"command": []string{fake}}
	}
	b, _ := json.Marshal(map[string]any{
		"bridge_url": bridgeURL, "bridge_token": tok.Secret, "coordinator_id": id, "host": id, "status_addr": addr,
		"startup_mode": "resume", "shutdown_grace_s": 2, "claim_ttl_s": 3, "agents": entries,
	})
	if err := os.WriteFile(m.cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}

// start runs `agent-bridge coordinator` for the machine and waits until it
// follows the log.
func (m *machine) start(bin string) {
	m.t.Helper()
	state := m.state
	if state == "" {
		state = filepath.Join(m.dir, "state", "coordinator.db")
	}
	cmd := exec.Command(bin, "coordinator", "--config", m.cfgPath, "--state", state)
	cmd.Env = append(os.Environ(), "HOME="+filepath.Join(m.dir, "home"), "FAKE_ADAPTER_DIR="+m.fakeDir, "BRIDGE_TOKEN=", "BRIDGE_URL=")
	p := &coordProc{cmd: cmd, stderr: &testutil.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		m.t.Fatalf("start coordinator %s: %v", m.id, err)
	}
	go func() { p.done <- cmd.Wait() }()
	m.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if m.t.Failed() {
			m.t.Logf("coordinator %s stderr:\n%s", m.id, p.stderr.String())
		}
	})
	testutil.WaitFor(m.t, 30*time.Second, "coordinator "+m.id+" to follow the log", func() bool {
		resp, err := http.Get(m.statusURL + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Following bool }
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Following
	})
	m.proc = p
}

// receiptLog collects every receipt change of a thread from its stream.
type receiptLog struct {
	mu  sync.Mutex
	all []agentbridge.Receipt
}

func followReceipts(t *testing.T, cl *client.Client, thread string) *receiptLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := cl.Stream(ctx, thread, 0)
	if err != nil {
		t.Fatal(err)
	}
	l := &receiptLog{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			it, err := st.Next()
			if err != nil {
				return
			}
			if it.Receipt != nil {
				l.mu.Lock()
				l.all = append(l.all, *it.Receipt)
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		st.Close()
		<-done
	})
	return l
}

// of returns the receipts of one pair, in the order they changed.
func (l *receiptLog) of(event, participant string) []agentbridge.Receipt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []agentbridge.Receipt
	for _, r := range l.all {
		if r.Event == event && r.Participant == participant {
			out = append(out, r)
		}
	}
	return out
}

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
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin, fake := buildCoordBinaries(t)
	t.Run("sqlite", func(t *testing.T) { testTwoMachines(t, bin, fake, filepath.Join(t.TempDir(), "bridge.db")) })
	t.Run("postgres", func(t *testing.T) { testTwoMachines(t, bin, fake, pg.Database(t)) })
}

func testTwoMachines(t *testing.T, bin, fake, db string) {
	url, person, _ := logServe(t, bin, db)
	cl := client.New(url, client.WithToken(person))
	ctx := context.Background()

	laptop := newMachine(t, cl, url, fake, "laptop", "alice")
	server := newMachine(t, cl, url, fake, "server", "bob")
	laptop.start(bin)
	server.start(bin)

	list, err := cl.Coordinators(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Coordinators) != 2 || !list.Coordinators[0].Live || !list.Coordinators[1].Live ||
		list.Coordinators[0].Host != "laptop" || list.Coordinators[0].StatusURL != laptop.statusURL {
		t.Fatalf("GET /coordinators = %+v", list)
	}
	if a, b := list.Agents["alice"], list.Agents["bob"]; len(a) != 1 || a[0] != "laptop" || len(b) != 1 || b[0] != "server" {
		t.Errorf("agents served = %v, want alice by laptop and bob by server", list.Agents)
	}

	th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "two machines"})
	if err != nil {
		t.Fatal(err)
	}
	receipts := followReceipts(t, cl, th.ID)
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
				rs := receipts.of(w.trigger.ID, p)
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
			rs := receipts.of(sentinel.ID, p)
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
			for _, r := range receipts.of(w.trigger.ID, p) {
				if r.State == agentbridge.ReceiptSkipped {
					t.Errorf("trigger %q: a skipped receipt for %s: %+v", w.trigger.Content, p, r)
				}
			}
		}
	}
	for _, p := range []string{"alice", "bob"} {
		if r := receipts.of(sentinel.ID, p); len(r) != 1 || r[0].From != map[string]string{"alice": "laptop", "bob": "server"}[p] {
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
	if code != 0 || !strings.Contains(out, "coordinator laptop @ laptop ("+laptop.statusURL+")") ||
		!strings.Contains(out, "coordinator server @ server ("+server.statusURL+")") ||
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
	twin := newMachine(t, cl, url, fake, "laptop", "alice")
	twin.start(bin)
	for _, m := range []*machine{laptop, twin} {
		testutil.WaitFor(t, 30*time.Second, "a duplicate warning from "+m.statusURL, func() bool {
			return strings.Contains(m.proc.stderr.String(), "another coordinator is running under the same coordinator_id")
		})
	}
	twin.proc.terminate(t)
	laptop.proc.terminate(t)
	server.proc.terminate(t)
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
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin, fake := buildCoordBinaries(t)
	url, person, _ := logServe(t, bin, filepath.Join(t.TempDir(), "bridge.db"))
	cl := client.New(url, client.WithToken(person))
	ctx := context.Background()
	m := newMachine(t, cl, url, fake, "solo", "alice")
	cfg := func(agents ...string) {
		var raw map[string]any
		b, err := os.ReadFile(m.cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		entries := map[string]any{}
		for _, a := range agents {
			entries[a] = map[string]any{"command": []string{fake}}
		}
		raw["agents"], raw["claim_ttl_s"] = entries, 600
		b, _ = json.Marshal(raw)
		tmp := m.cfgPath + ".new"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, m.cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	cfg("alice")
	m.start(bin)
	cfg("alice", "bob")
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
