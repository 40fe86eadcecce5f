package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// stateCountingStore counts the State reads.
type stateCountingStore struct {
	Store
	states atomic.Int64
}

func (c *stateCountingStore) State(ctx context.Context, thread string, at int64) (agentbridge.ThreadState, int64, error) {
	c.states.Add(1)
	return c.Store.State(ctx, thread, at)
}

// TestIgnoredNoteReadsNoState: the "ignored" note of a new append comes
// with the store's answer (decided under the write), so an addressed
// message or a control costs no State read of its own; only a replay,
// whose state before the store does not have at hand, reads it.
func TestIgnoredNoteReadsNoState(t *testing.T) {
	t.Cleanup(testutil.CheckGoroutines(t))
	cs := &stateCountingStore{Store: openStore(t)}
	ts := serve(t, cs, Options{})
	ts.newThread("t")
	note := func(a answer) string {
		var out appendAnswer
		if err := json.Unmarshal(a.body, &out); err != nil {
			t.Fatalf("decode %s: %v", a.body, err)
		}
		if out.Ignored == nil {
			return ""
		}
		return out.Ignored.Code
	}
	for i, st := range []struct{ body, want string }{
		{`{"from":"user","to":"codex","content":"hi"}`, agentbridge.IgnoredNotInvited},
		{`{"type":"control","from":"user","content":{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m"}}}}`, ""},
		{`{"type":"control","from":"user","content":{"pause":{"on":true}}}`, ""},
		{`{"from":"user","to":"codex","content":"hi"}`, agentbridge.IgnoredPaused},
		{`{"type":"control","from":"codex","content":{"pause":{"on":false}}}`, agentbridge.IgnoredNotHuman},
	} {
		if got := note(ts.must(http.StatusOK, "POST", "/threads/t/events", st.body, fmt.Sprintf("Idempotency-Key: k%d", i))); got != st.want {
			t.Errorf("%s: note %q, want %q", st.body, got, st.want)
		}
	}
	if n := cs.states.Load(); n != 0 {
		t.Errorf("%d State reads for new appends, want 0", n)
	}
	// A replay of the paused message still carries its note.
	body := `{"from":"user","to":"codex","content":"hi"}`
	if got := note(ts.must(http.StatusOK, "POST", "/threads/t/events", body, "Idempotency-Key: k3")); got != agentbridge.IgnoredPaused {
		t.Errorf("replay: note %q, want %q", got, agentbridge.IgnoredPaused)
	}
}
