package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/postgres"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestClaimsTwoBridgesOnePostgres: two bridges, each with its own store
// on one PostgreSQL database, take claims for one run from two
// coordinators at once: exactly one coordinator is granted it, at fence 1.
// A waiting claim both bridges sweep expires with exactly one error
// message and a failed receipt.
func TestClaimsTwoBridgesOnePostgres(t *testing.T) {
	pg := pgtest.New()
	t.Cleanup(pg.Stop)
	dbURL := pg.Database(t)
	t.Cleanup(testutil.CheckGoroutines(t))
	var bridges [2]*testServer
	var stores [2]*postgres.Store
	for i := range bridges {
		st, err := postgres.Open(context.Background(), dbURL, postgres.Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatalf("open store: %v", err)
		}
		t.Cleanup(func() { _ = st.Close() })
		stores[i] = st
		bridges[i] = serve(t, st, Options{ClaimSweep: 10 * time.Millisecond})
		bridges[i].store = nil
	}
	a, b := bridges[0], bridges[1]
	a.newThread("t1")
	a.invite("t1", "claude", "ghost")
	trigger := a.post("t1", "user", "@claude hello")
	a.registerTTL("ca", "host-a", time.Minute, "claude")
	b.registerTTL("cb", "host-b", time.Minute, "claude")

	type outcome struct {
		res agentbridge.ClaimResult
		err error
	}
	out := make(chan outcome, 16)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ts, id := bridges[i%2], []string{"ca", "cb"}[(i/2)%2]
			resp, err := http.Post(ts.url+"/claims", "application/json", strings.NewReader(claimBody(id, trigger.ID, "claude")))
			if err != nil {
				out <- outcome{err: err}
				return
			}
			defer resp.Body.Close()
			var o outcome
			if resp.StatusCode != 200 {
				o.err = fmt.Errorf("status %d", resp.StatusCode)
			} else {
				o.err = json.NewDecoder(resp.Body).Decode(&o.res)
			}
			out <- o
		}()
	}
	wg.Wait()
	close(out)
	holders := map[string]bool{}
	for o := range out {
		if o.err != nil {
			t.Fatalf("claim: %v", o.err)
		}
		if o.res.Claim.Fence != 1 {
			t.Fatalf("a claim at fence %d, want 1: %+v", o.res.Claim.Fence, o.res)
		}
		if o.res.Granted {
			holders[o.res.Claim.Coordinator] = true
		}
	}
	if len(holders) != 1 {
		t.Fatalf("granted to %v, want exactly one coordinator", holders)
	}

	res := claimAnswer(t, b.must(200, "POST", "/claims", claimBody("cb", trigger.ID, "ghost", `"wait":true`, `"pending_ttl_ms":300`)))
	if res.Claim.State != agentbridge.ClaimWaiting {
		t.Fatalf("a waiting claim: %+v", res)
	}
	waitFor(t, 15*time.Second, "the expiry swept by both bridges", func() bool {
		list := a.receiptsOf("/threads/t1/receipts?event=" + trigger.ID)
		due, err := stores[0].DueClaims(context.Background())
		return err == nil && len(due) == 0 && len(list) == 1 && list[0].State == agentbridge.ReceiptFailed
	})
	evs, err := stores[1].ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: "t1", After: -1})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs {
		if e.From == agentbridge.ClaimSender {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d messages from the bridge, want exactly 1", n)
	}
}
