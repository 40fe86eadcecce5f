package bridge

import (
	"net/http"
	"strings"
	"testing"
)

// BenchmarkAppendIgnoredCheck measures what the "ignored" decision
// (agentbridge.IgnoredEffect) adds to an append: a message to all is not
// judged, a message addressed to an invited agent is, by the store
// inside the append (docs/performance.md).
func BenchmarkAppendIgnoredCheck(b *testing.B) {
	for _, tc := range []struct{ name, body string }{
		{"to=all", `{"from":"user","content":"hello"}`},
		{"to=codex", `{"from":"user","to":"codex","content":"hello"}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ts := newTestServer(b, Options{})
			ts.newThread("t")
			ts.must(http.StatusOK, "POST", "/threads/t/events", `{"type":"control","from":"user","content":{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m"}}}}`)
			for range 1000 {
				ts.must(http.StatusOK, "POST", "/threads/t/events", `{"from":"user","content":"history"}`)
			}
			b.ResetTimer()
			for range b.N {
				a := ts.do("POST", "/threads/t/events", tc.body)
				if a.status != http.StatusOK || strings.Contains(string(a.body), `"ignored"`) {
					b.Fatalf("append: %d %s", a.status, a.body)
				}
			}
		})
	}
}
