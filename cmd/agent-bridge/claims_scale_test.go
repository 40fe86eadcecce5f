package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestClaimsTenByTen: one serve and ten coordinator processes (each its
// own HOME, state file, status port and token), each serving the same ten
// agents; 1,000 triggers spread over the agents and four threads, posted
// by four senders at once. Every trigger is answered exactly once and run
// exactly once in all (the fake adapter answers at once and appends a line
// to its coordinator's runs.log); every coordinator's record of a trigger
// it did not run ends elsewhere. The run's total time, triggers per
// second, runs per coordinator, claims lost and serve's memory are logged
// for docs/performance.md. It takes ~16 s on a quiet 2-core machine, so it
// is part of the default run (skipped with -short, as its siblings are).
func TestClaimsTenByTen(t *testing.T) {
	stack.Heavy(t)
	const (
		nCoords   = 10
		nAgents   = 10
		nThreads  = 4
		nSenders  = 4
		nTriggers = 1000
	)
	bin, fake := buildCoordBinaries(t)
	db := filepath.Join(t.TempDir(), "bridge.db")
	url, person, _ := logServe(t, bin, db)
	cl := client.New(url, client.WithToken(person))
	agents, machines := loadMachines(t, bin, fake, []string{url}, []*client.Client{cl}, nCoords, nAgents)
	threads := make([]*claimsThread, nThreads)
	for i := range threads {
		threads[i] = newClaimsThread(t, cl, agents...)
	}
	head, err := cl.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := cl.StreamAll(ctx, head)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// Trigger i goes to agent i%10 in thread (i/10)%4, so each pair of a
	// thread and an agent gets 25; sender s posts the triggers i ≡ s (mod 4).
	triggers := make([]string, nTriggers)
	start := time.Now()
	var wg sync.WaitGroup
	for s := range nSenders {
		wg.Go(func() {
			for i := s; i < nTriggers; i += nSenders {
				th := threads[(i/nAgents)%nThreads]
				b, _ := json.Marshal(fmt.Sprintf("trigger %d", i))
				ev, err := cl.Append(th.ctx, th.id, agentbridge.EventInput{From: "user", To: agents[i%nAgents], Content: b}, "")
				if err != nil {
					t.Errorf("trigger %d: %v", i, err)
					return
				}
				triggers[i] = ev.ID
			}
		})
	}
	// Replies are counted from the global stream as they come; the
	// exactly-once check reads the threads afterwards.
	replied := 0
	for replied < nTriggers {
		it := testutil.Within(t, 10*time.Minute, fmt.Sprintf("reply %d of %d", replied+1, nTriggers), func() { st.Close() }, st.Next)
		if it.Event != nil && it.Event.Meta.ReplyTo != "" && strings.HasPrefix(it.Event.From, "agent") {
			replied++
		}
	}
	elapsed := time.Since(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	rss, peak := procMemory(t, db)

	replies := map[string]int{}
	for _, th := range threads {
		for _, a := range agents {
			for id, n := range th.replies(a) {
				replies[id] += n
			}
		}
	}
	// Every coordinator saw every trigger: its record ends run or
	// elsewhere once the claim is settled.
	counts := make([]map[string]int, nCoords)
	testutil.WaitFor(t, 2*time.Minute, "every coordinator's records to end", func() bool {
		for i, m := range machines {
			counts[i] = statusCounts(t, m, person)
			if counts[i]["total"] < nTriggers || counts[i]["queued"]+counts[i]["running"] > 0 {
				return false
			}
		}
		return true
	})
	runs := map[string]int{}
	perCoord := make([]int, nCoords)
	lost := 0
	for i, m := range machines {
		for id, n := range m.RunsOf() {
			runs[id] += n
			perCoord[i] += n
		}
		lost += counts[i]["elsewhere"]
		if counts[i]["elsewhere"]+counts[i]["succeeded"] != nTriggers {
			t.Errorf("%s's records: %v; want %d, each succeeded or elsewhere", m.ID, counts[i], nTriggers)
		}
	}
	for i, id := range triggers {
		if replies[id] != 1 || runs[id] != 1 {
			t.Errorf("trigger %d (%s): %d replies and %d runs, want 1 and 1", i, id, replies[id], runs[id])
		}
	}
	if len(replies) != nTriggers || len(runs) != nTriggers {
		t.Errorf("%d triggers replied and %d run, want %d", len(replies), len(runs), nTriggers)
	}
	t.Logf("10 coordinators × 10 agents, %d triggers: all replied in %s (%.1f triggers/s); runs per coordinator %v; claims lost (elsewhere records) %d; serve RSS %d MiB, peak %d MiB",
		nTriggers, elapsed.Round(10*time.Millisecond), float64(nTriggers)/elapsed.Seconds(), perCoord, lost, rss>>20, peak>>20)
}

// loadMachines starts n coordinator processes for a load test, machine i
// following bridge urls[i%len(urls)] (persons[i%…] its person client),
// each serving the same nAgents agents agent0, agent1… (the fake adapter,
// client fake-<agent>), so that they race for every claim; it returns the
// agents and the machines. No per-thread start limit, and the default
// claim_ttl_s: with many processes on two cores a heartbeat may come
// late, and a lapse would re-run a trigger its holder ran (the reply still
// once, fenced), which is not what the load tests measure.
func loadMachines(t *testing.T, bin, fake string, urls []string, persons []*client.Client, n, nAgents int) ([]string, []*stack.Machine) {
	t.Helper()
	agents := make([]string, nAgents)
	entries := map[string]any{}
	for i := range agents {
		agents[i] = fmt.Sprintf("agent%d", i)
		entries[agents[i]] = map[string]any{"command": []string{fake}, "client": "fake-" + agents[i]}
	}
	machines := make([]*stack.Machine, n)
	for i := range machines {
		m := stack.NewMachine(t, persons[i%len(persons)], urls[i%len(urls)], bin, fake, fmt.Sprintf("m%d", i), agents...)
		m.Set("agents", entries)
		m.Set("max_invocations_per_minute", 1000000)
		m.Set("claim_ttl_s", 30)
		m.Start()
		machines[i] = m
	}
	return agents, machines
}

// statusCounts counts machine m's invocation records by status (and in
// all, as "total"), from its status API.
func statusCounts(t *testing.T, m *stack.Machine, token string) map[string]int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, m.StatusURL+"/invocations?limit="+strconv.Itoa(agentbridge.MaxEventsLimit), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got status.InvocationsResponse
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	out := map[string]int{"total": len(got.Invocations)}
	for _, inv := range got.Invocations {
		out[inv.Status]++
	}
	return out
}

// procMemory reads the resident memory and its peak (VmRSS, VmHWM) of
// the serve process this test started on db: the child of this process
// whose command line names db.
func procMemory(t *testing.T, db string) (rss, peak int64) {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	self := strconv.Itoa(os.Getpid())
	for _, d := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !slices.Contains(strings.Split(string(cmdline), "\x00"), db) {
			continue
		}
		st, err := os.ReadFile(filepath.Join(d, "status"))
		if err != nil {
			continue
		}
		fields := map[string]int64{}
		parent := ""
		for _, line := range strings.Split(string(st), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			if k == "PPid" {
				parent = v
			}
			if n, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64); err == nil {
				fields[k] = n << 10
			}
		}
		if parent == self {
			return fields["VmRSS"], fields["VmHWM"]
		}
	}
	t.Fatalf("no serve process of this test on %s", db)
	return 0, 0
}
