package coordinator_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
)

// getStatus GETs a status API path and decodes the answer into out,
// returning the status code.
func (s *stack) getStatus(path string, out any) int {
	s.t.Helper()
	resp, err := http.Get(s.coord.StatusURL() + path)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			s.t.Fatalf("decode %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

// TestDashboardEndpoints: GET /runs filters and carries the trigger's
// excerpt, GET /usage sums tokens and cost per participant, and / serves
// the dashboard page with its CSP.
func TestDashboardEndpoints(t *testing.T) {
	t.Parallel()
	s := startStack(t, nil)
	th := s.thread("dashboard")
	s.invite(th, "alice", agentbridge.Profile{})
	s.invite(th, "bob", agentbridge.Profile{})
	long := strings.Repeat("é", 200)
	a := s.say(th, "alice", "fake:progress=2 "+long)
	b := s.say(th, "bob", "fake:progress=3")
	s.waitStatus(a.ID, "alice", ledger.StatusSucceeded)
	s.waitStatus(b.ID, "bob", ledger.StatusSucceeded)

	var runs status.RunsResponse
	if code := s.getStatus("/runs?participant=alice", &runs); code != 200 || len(runs.Runs) != 1 {
		t.Fatalf("GET /runs?participant=alice: %d %+v", code, runs)
	}
	ex := runs.Runs[0].TriggerExcerpt
	if !strings.HasPrefix(ex, "fake:progress=2 éé") || !strings.HasSuffix(ex, "…") || len([]rune(ex)) != 120 {
		t.Errorf("excerpt = %q, want the trigger's first 119 characters and …", ex)
	}
	if code := s.getStatus("/runs?thread="+th+"&status=succeeded", &runs); code != 200 || len(runs.Runs) != 2 || runs.Runs[0].Participant != "bob" {
		t.Errorf("GET /runs by thread and status: %d %+v", code, runs)
	}
	if code := s.getStatus("/runs?status=done", nil); code != 400 {
		t.Errorf("GET /runs?status=done: %d, want 400", code)
	}

	var usage status.UsageResponse
	if code := s.getStatus("/usage?tz_offset_min=60", &usage); code != 200 {
		t.Fatalf("GET /usage: %d", code)
	}
	want := map[string]ledger.ParticipantUsage{
		"alice": {Participant: "alice", Runs: 1, InputTokens: 2, OutputTokens: 4, CostUSD: 0.002},
		"bob":   {Participant: "bob", Runs: 1, InputTokens: 3, OutputTokens: 6, CostUSD: 0.003},
	}
	for _, list := range [][]ledger.ParticipantUsage{usage.Today, usage.Last7Days} {
		if len(list) != 2 {
			t.Fatalf("usage = %+v", usage)
		}
		for _, u := range list {
			w := want[u.Participant]
			if u.Runs != w.Runs || u.InputTokens != w.InputTokens || u.OutputTokens != w.OutputTokens || u.CostUSD < w.CostUSD-1e-9 || u.CostUSD > w.CostUSD+1e-9 {
				t.Errorf("usage of %s = %+v, want %+v", u.Participant, u, w)
			}
		}
	}
	if code := s.getStatus("/usage?tz_offset_min=x", nil); code != 400 {
		t.Errorf("GET /usage?tz_offset_min=x: %d, want 400", code)
	}

	resp, err := http.Get(s.coord.StatusURL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("GET /: %d %v", resp.StatusCode, resp.Header)
	}
	if code := s.getStatus("/dashboard/nothing.js", nil); code != 404 {
		t.Errorf("GET /dashboard/nothing.js: %d, want 404", code)
	}
}
