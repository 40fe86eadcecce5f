package wakebench

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// binEnv names a prebuilt agent-bridge binary for the benchmarks to run
// instead of building the tree's, so that one benchmark measures two
// builds (an older commit's binary against the head's) alternately.
const binEnv = "WAKEBENCH_BIN"

// bridge is a running `agent-bridge serve` and what the benchmarks start
// beside it: the binaries, a scratch directory and a client holding the
// person token serve made on its first start.
type bridge struct {
	b      *testing.B
	ctx    context.Context
	cancel context.CancelFunc
	dir    string
	bin    string // agent-bridge
	fake   string // the compiled fake adapter
	url    string
	cl     *client.Client
}

// coordinator is a running `agent-bridge coordinator`: its status API's
// URL and the coordinator token it runs on.
type coordinator struct {
	status string
	token  string
}

// startBridge builds the binaries (agent-bridge from $WAKEBENCH_BIN when
// set), starts serve on a SQLite file and stops everything it started
// when b ends.
func startBridge(b *testing.B) *bridge {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	dir := b.TempDir()
	bin := os.Getenv(binEnv)
	if bin == "" {
		var err error
		if bin, err = testutil.GoBuild(ctx, "./cmd/agent-bridge", dir, false); err != nil {
			b.Fatal(err)
		}
	}
	fake, err := testutil.GoBuild(ctx, "./internal/testkit/fakeadapter", dir, false)
	if err != nil {
		b.Fatal(err)
	}
	addr := testutil.FreeAddr(b)
	br := &bridge{b: b, ctx: ctx, cancel: cancel, dir: dir, bin: bin, fake: fake, url: "http://" + addr}
	br.run("serve", "", nil, "serve", "-addr", addr, "-db", filepath.Join(dir, "bridge.db"))
	testutil.WaitFor(b, 30*time.Second, "bridge up", func() bool { _, err := client.New(br.url).Ping(ctx); return err == nil })
	person, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		b.Fatal(err)
	}
	br.cl = client.New(br.url, client.WithToken(strings.TrimSpace(string(person))))
	return br
}

// run starts the process name (its log is dir/name.log, printed if b
// fails) with token as BRIDGE_TOKEN and env added, and stops it with
// SIGTERM when b ends.
func (br *bridge) run(name, token string, env []string, args ...string) {
	b := br.b
	cmd := exec.CommandContext(br.ctx, br.bin, args...)
	cmd.Dir = br.dir
	cmd.Env = append(append(os.Environ(), "FAKE_ADAPTER_DIR=", "BRIDGE_TOKEN="+token), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	logf, err := os.Create(filepath.Join(br.dir, name+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	b.Cleanup(func() {
		if b.Failed() {
			out, _ := os.ReadFile(logf.Name())
			b.Logf("%s log:\n%s", name, out)
		}
	})
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	// Cancelling the processes' context sends each of them SIGTERM.
	b.Cleanup(func() { br.cancel(); _ = cmd.Wait() })
}

// startCoordinator starts a coordinator named id (its own HOME, state
// file, status port and coordinator token) serving the fake adapter as
// each of agents, with the config keys of extra over the benchmarks'
// own, and waits until it follows the bridge's log. An empty id leaves
// coordinator_id and host to their defaults.
func (br *bridge) startCoordinator(id string, agents []string, extra map[string]any) coordinator {
	b := br.b
	name := id
	if name == "" {
		name = "coordinator"
	}
	home := filepath.Join(br.dir, name)
	if err := os.MkdirAll(filepath.Join(home, "home"), 0o755); err != nil {
		b.Fatal(err)
	}
	// A coordinator token names the coordinator's own id (the default's
	// when id is empty).
	self := id
	if self == "" {
		self = "bridge-coordinator"
	}
	tok, err := br.cl.CreateToken(br.ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: name, Participant: self})
	if err != nil {
		b.Fatal(err)
	}
	status := testutil.FreeAddr(b)
	entries := map[string]any{}
	for _, a := range agents {
		entries[a] = map[string]any{"command": []string{br.fake}, "client": "fake-" + a}
	}
	cfg := map[string]any{
		"bridge_url": br.url, "status_addr": status, "startup_mode": "end",
		"max_invocations_per_minute": 100000, "human_ids": []string{"user"}, "agents": entries,
	}
	if id != "" {
		cfg["coordinator_id"], cfg["host"] = id, id
	}
	maps.Copy(cfg, extra)
	cfgPath := filepath.Join(home, "coordinator.config.json")
	raw, _ := json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	br.run(name, tok.Secret, []string{"HOME=" + filepath.Join(home, "home")},
		"coordinator", "-config", cfgPath, "-state", filepath.Join(home, "coordinator.db"))
	testutil.WaitFor(b, 30*time.Second, name+" to follow the log", func() bool {
		resp, err := http.Get("http://" + status + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Following bool }
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Following
	})
	return coordinator{status: "http://" + status, token: tok.Secret}
}

// daemons are agent-bridge serve and coordinator as two processes, with
// the compiled fake adapter as agent "alice". The bridge holds a person
// token (cl's) and the coordinator a coordinator token, as deployed since
// contract 7.3: each run then gets an agent token of its own.
type daemons struct {
	cl    *client.Client
	fake  string // the fake adapter's path
	coord coordinator
}

// startDaemons builds and starts serve and coordinator, with the config
// keys of extra over the benchmarks' own, and stops them when b ends.
func startDaemons(b *testing.B, extra map[string]any) daemons {
	br := startBridge(b)
	return daemons{cl: br.cl, fake: br.fake, coord: br.startCoordinator("", []string{"alice"}, extra)}
}

// invite invites the fake agent participant into thread th and returns
// the invite's seq.
func invite(b *testing.B, cl *client.Client, th, participant string) int64 {
	body, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": participant,
		"profile": map[string]string{"client": "fake-" + participant, "model": "m1"}}})
	e, err := cl.Append(context.Background(), th, agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user", Content: body}, "")
	if err != nil {
		b.Fatal(err)
	}
	return e.Seq
}

// inviteAlice invites the fake agent alice into thread th and returns the
// invite's seq.
func inviteAlice(b *testing.B, cl *client.Client, th string) int64 { return invite(b, cl, th, "alice") }

// invocation is a coordinator's record of a run, with the times the
// benchmarks read.
type invocation struct {
	TriggerID        string `json:"trigger_id"`
	Status           string `json:"status"`
	QueuedAt         string `json:"queued_at"`
	ProcessStartedAt string `json:"process_started_at"`
	FinishedAt       string `json:"finished_at"`
}

// invocations reads the records of thread from coordinator c's status API.
func invocations(b *testing.B, c coordinator, thread string) []invocation {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, c.status+"/invocations?limit=10000&thread="+thread, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Invocations []invocation `json:"invocations"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		b.Fatal(err)
	}
	return body.Invocations
}

// reportStages reports the p50 of each stage of a trigger's way, from the
// trigger's and the reply's timestamps on the bridge and the records of
// coords, so that a regression names its stage.
func reportStages(b *testing.B, cl *client.Client, thread string, coords ...coordinator) {
	evs, err := cl.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		b.Fatal(err)
	}
	ts := map[string]time.Time{}      // event id → appended
	replyTS := map[string]time.Time{} // trigger id → reply appended
	for _, e := range evs {
		t, err := agentbridge.ParseTime(e.TS)
		if err != nil {
			b.Fatal(err)
		}
		ts[e.ID] = t
		if e.Meta.ReplyTo != "" {
			replyTS[e.Meta.ReplyTo] = t
		}
	}
	stages := []string{"appended→queued", "queued→process-started", "process-started→finished", "finished→reply-stored"}
	d := make([][]time.Duration, len(stages))
	for _, c := range coords {
		for _, inv := range invocations(b, c, thread) {
			q, e1 := agentbridge.ParseTime(inv.QueuedAt)
			p, e2 := agentbridge.ParseTime(inv.ProcessStartedAt)
			f, e3 := agentbridge.ParseTime(inv.FinishedAt)
			r, ok := replyTS[inv.TriggerID]
			if e1 != nil || e2 != nil || e3 != nil || !ok {
				continue
			}
			for i, v := range []time.Duration{q.Sub(ts[inv.TriggerID]), p.Sub(q), f.Sub(p), r.Sub(f)} {
				d[i] = append(d[i], v)
			}
		}
	}
	for i, name := range stages {
		if len(d[i]) == 0 {
			continue
		}
		slices.Sort(d[i])
		b.ReportMetric(float64(d[i][len(d[i])/2].Microseconds())/1000, name+"-ms")
	}
}
