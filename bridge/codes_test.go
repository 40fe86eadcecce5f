package bridge

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestCodesPastTheirCap: 80 login links and 80 pairing links asked at
// once: 64 of each are made, and each of the 16 beyond the cap is 429
// too_many with a sentence saying what to do; nothing is logged at ERROR
// (before, the login links past the cap answered 500, logged as the
// bridge's failure).
func TestCodesPastTheirCap(t *testing.T) {
	t.Parallel()
	logs := &testutil.Buffer{}
	ts := closedServer(t, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	for _, c := range []struct{ path, body, sentence string }{
		{"/auth/login-links", "", "64 login links are waiting to be used; use one, or wait 10m0s for them to lapse."},
		{"/auth/pair", `{"name":"phone"}`, "64 pairing links are waiting to be used; use one, or wait 10m0s for them to lapse."},
	} {
		var mu sync.Mutex
		statuses := map[int]int{}
		var refusals []answer
		var wg sync.WaitGroup
		for range 80 {
			wg.Go(func() {
				a := ts.do("POST", c.path, c.body)
				mu.Lock()
				defer mu.Unlock()
				statuses[a.status]++
				if a.status != http.StatusOK {
					refusals = append(refusals, a)
				}
			})
		}
		wg.Wait()
		if statuses[http.StatusOK] != 64 || statuses[http.StatusTooManyRequests] != 16 {
			t.Errorf("%s ×80: statuses %v, want 64 × 200 and 16 × 429", c.path, statuses)
		}
		for _, a := range refusals {
			if a.errCode() != agentbridge.ECodeTooMany || a.errField("message") != c.sentence {
				t.Errorf("%s past the cap: %d %s", c.path, a.status, a.body)
				break
			}
		}
	}
	if strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("a refusal past the cap was logged as an error:\n%s", logs)
	}
}
