package wakebench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
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
	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

// BenchmarkWakeFromOutside posts b.N triggers (default 60 with
// -benchtime 60x), each after an idle gap of 0–50 ms, to a participant whose
// adapter is the compiled fake adapter, and reports the p50 and p99 of POST
// → reply seen on the thread's SSE stream, the floor's p50 and their ratio,
// and the same for the floor measured after the same idle gaps.
func BenchmarkWakeFromOutside(b *testing.B) {
	ctx := context.Background()
	d := startDaemons(b, nil)
	cl, fake, status := d.cl, d.fake, d.status

	th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "wake"})
	if err != nil {
		b.Fatal(err)
	}
	st, err := cl.Stream(ctx, th.ID, inviteAlice(b, cl, th.ID))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	awaitReply := func(trig string) {
		for {
			it := testutil.Within(b, time.Minute, "a reply", func() { st.Close() }, st.Next)
			if it.Event != nil && it.Event.Meta.ReplyTo == trig {
				return
			}
		}
	}
	post := func(i int) string {
		e, err := cl.Append(ctx, th.ID, agentbridge.EventInput{From: "user", To: "alice",
			Content: json.RawMessage(fmt.Sprintf("%q", fmt.Sprintf("ping %d", i)))}, "")
		if err != nil {
			b.Fatal(err)
		}
		return e.ID
	}
	// One trigger first, so that the coordinator is following and the
	// adapter's binary is in the page cache.
	awaitReply(post(-1))

	rng := rand.New(rand.NewPCG(1, 2))
	lat := make([]time.Duration, 0, b.N)
	gaps := make([]time.Duration, b.N)
	for i := range gaps {
		gaps[i] = time.Duration(rng.IntN(51)) * time.Millisecond
	}
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		time.Sleep(gaps[i]) // the idle gap is the point of the benchmark
		b.StartTimer()
		t0 := time.Now()
		awaitReply(post(i))
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	floor, err := Floor(context.Background(), fake, cl, max(b.N, 30))
	if err != nil {
		b.Fatal(err)
	}
	// The same rounds after the triggers' idle gaps, to compare like with
	// like: a trigger after a gap wakes sleeping processes (and, on a VM,
	// processors) at every hop, which the floor's back-to-back rounds
	// never do.
	idleFloor, err := FloorAfterGaps(context.Background(), fake, cl, gaps)
	if err != nil {
		b.Fatal(err)
	}
	p50 := lat[len(lat)/2]
	b.ReportMetric(float64(idleFloor.Microseconds())/1000, "floor-after-gaps-p50-ms")
	b.ReportMetric(float64(p50)/float64(idleFloor), "p50/floor-after-gaps")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[(len(lat)-1)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(floor.Microseconds())/1000, "floor-p50-ms")
	b.ReportMetric(float64(p50)/float64(floor), "p50/floor")
	reportStages(b, cl, "http://"+status, d.coord, th.ID)
}

// reportStages reports the p50 of each stage of a trigger's way, from the
// trigger's and the reply's timestamps on the bridge and the ledger's
// timestamps of its invocation, so that a regression names its stage.
func reportStages(b *testing.B, cl *client.Client, status, token, thread string) {
	ctx := context.Background()
	evs, err := cl.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, status+"/invocations?limit=1000&thread="+thread, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Invocations []struct {
			TriggerID        string `json:"trigger_id"`
			QueuedAt         string `json:"queued_at"`
			ProcessStartedAt string `json:"process_started_at"`
			FinishedAt       string `json:"finished_at"`
		} `json:"invocations"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		b.Fatal(err)
	}
	stages := []string{"appended→queued", "queued→process-started", "process-started→finished", "finished→reply-stored"}
	d := make([][]time.Duration, len(stages))
	for _, inv := range body.Invocations {
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
	for i, name := range stages {
		if len(d[i]) == 0 {
			continue
		}
		slices.Sort(d[i])
		b.ReportMetric(float64(d[i][len(d[i])/2].Microseconds())/1000, name+"-ms")
	}
}

// daemons are agent-bridge serve and coordinator as two processes, with
// the compiled fake adapter as agent "alice". The bridge holds a person
// token (cl's) and the coordinator a coordinator token (coord), as
// deployed since contract 7.3: each run then gets an agent token of its
// own.
type daemons struct {
	cl     *client.Client
	fake   string // the fake adapter's path
	status string // the coordinator status API's address
	coord  string // the coordinator's token
}

// startDaemons builds and starts serve and coordinator, with the config
// keys of extra over the benchmarks' own, and stops them when b ends.
func startDaemons(b *testing.B, extra map[string]any) daemons {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	dir := b.TempDir()
	bin, err := testutil.GoBuild(ctx, "./cmd/agent-bridge", dir, false)
	if err != nil {
		b.Fatal(err)
	}
	fake, err := testutil.GoBuild(ctx, "./adapters/internal/fakeadapter", dir, false)
	if err != nil {
		b.Fatal(err)
	}
	addr, status := testutil.FreeAddr(b), testutil.FreeAddr(b)
	url := "http://" + addr
	cfg := map[string]any{
		"bridge_url": url, "status_addr": status, "startup_mode": "end",
		"max_invocations_per_minute": 100000, "human_ids": []string{"user"},
		"agents": map[string]any{"alice": map[string]any{"command": []string{fake}, "client": "fake"}},
	}
	maps.Copy(cfg, extra)
	cfgPath := filepath.Join(dir, "coordinator.config.json")
	raw, _ := json.Marshal(cfg)
	if err := os.WriteFile(cfgPath, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	start := func(token string, args ...string) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "FAKE_ADAPTER_DIR=", "BRIDGE_TOKEN="+token)
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 10 * time.Second
		logf, err := os.Create(filepath.Join(dir, args[0]+".log"))
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		b.Cleanup(func() {
			if b.Failed() {
				out, _ := os.ReadFile(logf.Name())
				b.Logf("%s log:\n%s", args[0], out)
			}
		})
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cancel(); _ = cmd.Wait() })
	}
	start("", "serve", "-addr", addr, "-db", filepath.Join(dir, "bridge.db"))
	testutil.WaitFor(b, 30*time.Second, "bridge up", func() bool { _, err := client.New(url).Ping(ctx); return err == nil })
	// The person token serve made on its first start.
	person, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		b.Fatal(err)
	}
	cl := client.New(url, client.WithToken(strings.TrimSpace(string(person))))
	coord, err := cl.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: "coordinator", Participant: "bridge-coordinator"})
	if err != nil {
		b.Fatal(err)
	}
	start(coord.Secret, "coordinator", "-config", cfgPath, "-state", filepath.Join(dir, "coordinator.db"))
	testutil.WaitFor(b, 30*time.Second, "coordinator up", func() bool {
		resp, err := http.Get("http://" + status + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return daemons{cl: cl, fake: fake, status: status, coord: coord.Secret}
}

// inviteAlice invites the fake agent into thread th and returns the
// invite's seq.
func inviteAlice(b *testing.B, cl *client.Client, th string) int64 {
	invite, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": "alice",
		"profile": map[string]string{"client": "fake", "model": "m1"}}})
	e, err := cl.Append(context.Background(), th, agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user", Content: invite}, "")
	if err != nil {
		b.Fatal(err)
	}
	return e.Seq
}
