package bridge

import (
	"net/http"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// BenchmarkHTTPClaim measures POST /claims over real HTTP on 127.0.0.1
// and a real SQLite file: "new" claims a new run of a new trigger each
// time (the bridge's check of its trigger, then an insert at fence 1), "again" repeats the holder's claim (the idempotent answer a
// retry gets), "fenced-append" appends a reply carrying the Bridge-Claim
// header (the fence read in the writer's transaction), next to "append"
// without it.
//
//	go test ./bridge -run '^$' -bench BenchmarkHTTPClaim -benchtime 3000x -count 3
func BenchmarkHTTPClaim(b *testing.B) {
	ts := newTestServer(b, Options{})
	ts.newThread("t1")
	ts.invite("t1", "claude")
	trigger := ts.post("t1", "user", "hello")
	ts.registerTTL("laptop", "laptop.local", 0, "claude")
	first := claimAnswer(b, ts.must(200, "POST", "/claims", claimBody("laptop", trigger.ID, "claude")))
	post := func(b *testing.B, path, body string, header ...string) {
		req, _ := http.NewRequest(http.MethodPost, ts.url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for _, h := range header {
			k, v, _ := strings.Cut(h, ": ")
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("POST %s: %d", path, resp.StatusCode)
		}
	}
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			// Every claim a new run: a trigger of its own, posted off
			// the clock.
			b.StopTimer()
			e := ts.post("t1", "user", "hello")
			b.StartTimer()
			post(b, "/claims", claimBody("laptop", e.ID, "claude"))
		}
	})
	b.Run("again", func(b *testing.B) {
		body := claimBody("laptop", trigger.ID, "claude")
		for b.Loop() {
			post(b, "/claims", body)
		}
	})
	fence := agentbridge.ClaimHeader + ": " + agentbridge.FormatClaimHeader(first.Claim.ID, first.Claim.Fence)
	b.Run("fenced-append", func(b *testing.B) {
		for b.Loop() {
			post(b, "/threads/t1/events", `{"from":"claude","content":"part"}`, fence)
		}
	})
	b.Run("append", func(b *testing.B) {
		for b.Loop() {
			post(b, "/threads/t1/events", `{"from":"claude","content":"part"}`)
		}
	})
}
