package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestPostgresTwoBridgesFourCoordinators (contract 8.3, issue 45 break
// 11): two serve processes on one PostgreSQL (a server of the test's own,
// whose log is read afterwards), and four coordinator processes, two
// following each bridge, each serving the same four agents, so that every
// trigger's claim is raced by four coordinators through two bridges;
// eight clients, four on each bridge, post 1,000 triggers over eight
// threads at once. Every trigger is answered exactly once, PostgreSQL's
// log holds no deadlock and no serialization failure, and neither bridge
// answered any request with a 5xx (its /metrics, by route and code) or
// logged an error. Before, a receipt's insert took its thread's row (the
// foreign key's check) after its claim's, against the writer's order
// (thread, then claim), and PostgreSQL broke the cycle by failing one of
// them with "deadlock detected".
func TestPostgresTwoBridgesFourCoordinators(t *testing.T) {
	stack.Heavy(t)
	const (
		nAgents   = 4
		nThreads  = 8
		nClients  = 8
		nTriggers = 1000
	)
	setup := time.Now()
	own := pgtest.New()
	t.Cleanup(own.Stop)
	db := own.Database(t)
	bin, fake := buildCoordBinaries(t)
	urlA, personA, logsA := logServe(t, bin, db)
	urlB, personB, logsB := logServe(t, bin, db)
	bridges := []*client.Client{client.New(urlA, client.WithToken(personA)), client.New(urlB, client.WithToken(personB))}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bridge A's errors:\n%s\nbridge B's errors:\n%s\nPostgreSQL's:\n%s", grepLines(logsA.String(), `"level":"ERROR"`, 10),
				grepLines(logsB.String(), `"level":"ERROR"`, 10), own.Log(t))
		}
	})
	agents, machines := loadMachines(t, bin, fake, []string{urlA, urlB}, bridges, 4, nAgents)
	threads := make([]*claimsThread, nThreads)
	for i := range threads {
		threads[i] = newClaimsThread(t, bridges[i%2], agents...)
	}
	t.Logf("set up in %s", time.Since(setup).Round(time.Millisecond))

	start := time.Now()
	triggers := make([]string, nTriggers)
	var wg sync.WaitGroup
	for c := range nClients {
		cl := bridges[c%2]
		wg.Go(func() {
			for i := c; i < nTriggers; i += nClients {
				th := threads[i%nThreads]
				b, _ := json.Marshal(fmt.Sprintf("trigger %d", i))
				ev, err := cl.Append(context.Background(), th.id, agentbridge.EventInput{From: "user", To: agents[(i/nThreads)%nAgents], Content: b}, "")
				if err != nil {
					t.Errorf("trigger %d: %v", i, err)
					return
				}
				triggers[i] = ev.ID
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	replies := map[string]int{}
	testutil.WaitFor(t, 5*time.Minute, "a reply to each of the 1,000 triggers", func() bool {
		clear(replies)
		for _, th := range threads {
			for _, a := range agents {
				for id, n := range th.replies(a) {
					replies[id] += n
				}
			}
		}
		return len(replies) >= nTriggers
	})
	elapsed := time.Since(start)
	settle := time.Now()
	// Every coordinator has settled every trigger: ran it or saw it run
	// elsewhere; a late duplicate would show now.
	testutil.WaitFor(t, 2*time.Minute, "every coordinator's records to end", func() bool {
		for _, m := range machines {
			c := statusCounts(t, m, personA)
			if c["total"] < nTriggers || c["queued"]+c["running"] > 0 {
				return false
			}
		}
		return true
	})
	t.Logf("settled in %s", time.Since(settle).Round(time.Millisecond))
	for _, th := range threads {
		for _, a := range agents {
			for id, n := range th.replies(a) {
				replies[id] = n
			}
		}
	}
	for i, id := range triggers {
		if replies[id] != 1 {
			t.Errorf("trigger %d (%s): %d replies, want 1", i, id, replies[id])
		}
	}

	pglog := own.Log(t)
	for _, bad := range []string{"deadlock detected", "could not serialize access"} {
		if n := strings.Count(pglog, bad); n > 0 {
			t.Errorf("PostgreSQL logged %q %d times:\n%s", bad, n, grepLines(pglog, bad, 20))
		}
	}
	for name, b := range map[string]struct {
		url  string
		logs *testutil.Buffer
	}{"A": {urlA, logsA}, "B": {urlB, logsB}} {
		if n := serverErrors(t, b.url, personA); n != "" {
			t.Errorf("bridge %s answered with a server error: %s", name, n)
		}
		if strings.Contains(b.logs.String(), `"level":"ERROR"`) {
			t.Errorf("bridge %s logged an error:\n%s", name, grepLines(b.logs.String(), `"level":"ERROR"`, 20))
		}
	}
	t.Logf("2 bridges × 4 coordinators on one PostgreSQL, %d triggers from %d clients: all answered once in %s (%.1f triggers/s)",
		nTriggers, nClients, elapsed.Round(time.Millisecond), float64(nTriggers)/elapsed.Seconds())
}

// serverErrors reads a bridge's /metrics and names each route and code
// it answered with a 5xx, with how many ("" when none).
func serverErrors(t *testing.T, url, token string) string {
	t.Helper()
	_, metrics := pushCall(t, "GET", url+"/metrics", token, "")
	re := regexp.MustCompile(`(?m)^agent_bridge_http_request_duration_seconds_count\{code="(5\d\d)",method="(\w+)",route="([^"]+)"\} (\d+)$`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(metrics, -1) {
		if n, _ := strconv.Atoi(m[4]); n > 0 {
			out = append(out, fmt.Sprintf("%s %s %s ×%d", m[2], m[3], m[1], n))
		}
	}
	return strings.Join(out, ", ")
}

// grepLines returns at most max lines of text holding s.
func grepLines(text, s string, max int) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) && len(out) < max {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
