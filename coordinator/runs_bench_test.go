package coordinator_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testbridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// BenchmarkProgressFlood measures what an adapter flooding its progress fd
// with 10,000 lines a second costs everyone else: the wake latency of
// another pair (p50 of trigger POST to reply on the thread stream, before
// and during the flood) and the resident memory of the coordinator, run as
// the real binary against an in-process bridge. Each phase takes at least
// 300 pings (b.N if larger). Run:
//
//	go test -run '^$' -bench BenchmarkProgressFlood -benchtime 1x ./coordinator/
func BenchmarkProgressFlood(b *testing.B) {
	ensureFake(b)
	dir := b.TempDir()
	bin, err := testutil.GoBuild(context.Background(), "./cmd/agent-bridge", dir, false)
	if err != nil {
		b.Fatal(err)
	}
	br := testbridge.New(b, "")
	cl := client.New(br.URL())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	statusAddr := ln.Addr().String()
	ln.Close()
	cfg, _ := json.Marshal(map[string]any{
		"bridge_url": br.URL(), "status_addr": statusAddr, "startup_mode": "resume",
		"adapter_timeout_s": 600, "max_invocations_per_minute": 100000, "presence_heartbeat_s": 10,
		"agents": map[string]any{"alice": map[string]any{"command": []string{fakePath}}, "flooder": map[string]any{"command": []string{fakePath}}},
	})
	cfgPath := filepath.Join(dir, "coordinator.config.json")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		b.Fatal(err)
	}
	coord := exec.Command(bin, "coordinator", "--config", cfgPath, "--state", filepath.Join(dir, "coordinator.db"), "--log-level", "warn")
	coord.Env = append(os.Environ(), "FAKE_ADAPTER_DIR=", "BRIDGE_TOKEN=")
	if err := coord.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = coord.Process.Signal(syscall.SIGTERM)
		_ = coord.Wait()
	}()
	statusURL := "http://" + statusAddr
	testutil.WaitFor(b, waitLong, "the coordinator to follow", func() bool {
		resp, err := http.Get(statusURL + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Following bool }
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Following
	})

	ctx := context.Background()
	newThread := func(name, who string) string {
		th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: name})
		if err != nil {
			b.Fatal(err)
		}
		inv, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": who, "profile": map[string]any{"client": "fake", "model": "m"}}})
		if _, err := cl.Append(ctx, th.ID, agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user", Content: inv}, ""); err != nil {
			b.Fatal(err)
		}
		return th.ID
	}
	pings := newThread("pings", "alice")
	st, err := cl.Stream(ctx, pings, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	n := max(b.N, 300)
	phase := func(label string) time.Duration {
		lat := make([]time.Duration, 0, n)
		for i := range n {
			start := time.Now()
			trig, err := cl.Append(ctx, pings, agentbridge.EventInput{From: "user", To: "alice", Content: jsonString(fmt.Sprintf("%s %d", label, i))}, "")
			if err != nil {
				b.Fatal(err)
			}
			for {
				it := testutil.Within(b, time.Minute, "a reply", func() { st.Close() }, st.Next)
				if it.Event != nil && it.Event.Meta.ReplyTo == trig.ID {
					break
				}
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		return percentile(lat, 50)
	}
	b.ResetTimer()
	phase("warm")
	base := phase("base")

	flood := newThread("flood", "flooder")
	trig, err := cl.Append(ctx, flood, agentbridge.EventInput{From: "user", To: "flooder", Content: jsonString("fake:flood=10000 fake:hang")}, "")
	if err != nil {
		b.Fatal(err)
	}
	var inv status.InvocationResponse
	get := func() {
		var list status.InvocationsResponse
		getJSON(b, statusURL+"/invocations?status=running", &list)
		for _, x := range list.Invocations {
			if x.TriggerID == trig.ID {
				getJSON(b, statusURL+"/invocations/"+strconv.FormatInt(x.ID, 10)+"?after=999999999999", &inv)
			}
		}
	}
	testutil.WaitFor(b, waitLong, "the flood to be recorded", func() bool { get(); return inv.ProgressCount > 10000 })
	c0, t0 := inv.ProgressCount, time.Now()
	during := phase("flood")
	get()
	rate := float64(inv.ProgressCount-c0) / time.Since(t0).Seconds()
	b.StopTimer()
	rssKiB, hwmKiB := procMem(b, coord.Process.Pid)
	var full status.InvocationResponse
	getJSON(b, statusURL+"/invocations/"+strconv.FormatInt(inv.ID, 10), &full)
	req, _ := http.NewRequest(http.MethodPost, statusURL+"/invocations/"+strconv.FormatInt(inv.ID, 10)+"/cancel", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	b.ReportMetric(float64(base.Microseconds())/1000, "base-p50-ms")
	b.ReportMetric(float64(during.Microseconds())/1000, "flood-p50-ms")
	b.ReportMetric(float64(during)/float64(base), "flood/base")
	b.ReportMetric(rate, "stored-lines/s")
	b.ReportMetric(float64(rssKiB)/1024, "coord-rss-MiB")
	b.ReportMetric(float64(hwmKiB)/1024, "coord-hwm-MiB")
	b.ReportMetric(float64(len(full.Progress)), "kept-records")
}

func getJSON(b *testing.B, url string, out any) {
	b.Helper()
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		b.Fatal(err)
	}
}

// procMem returns VmRSS and VmHWM (KiB) of a process.
func procMem(b *testing.B, pid int) (rss, hwm int64) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v
		case "VmHWM:":
			hwm = v
		}
	}
	return rss, hwm
}
