package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestReceiptWaitsForNoAppend: while the writer holds a thread's row (its
// batch waits for a claim another transaction holds), a receipt in that
// thread is stored at once: the receipt's thread lock (its foreign key's
// FOR KEY SHARE) does not conflict with the writer's (FOR NO KEY UPDATE).
// Before, the writer's FOR UPDATE made the receipt wait, and a receipt
// holding the claim the writer waited for closed the cycle PostgreSQL
// broke with "deadlock detected" (contract 8.3, issue 45 break 11).
func TestReceiptWaitsForNoAppend(t *testing.T) {
	t.Parallel()
	url := pg.Database(t)
	s := openStore(t, url, Options{})
	ctx := context.Background()
	storetest.NewThread(t, s, "t")
	storetest.MustAppend(t, s, "t", storetest.Control("user", `{"invite":{"participant_id":"claude","profile":{"client":"claude","model":"m"}}}`))
	trigger := storetest.MustAppend(t, s, "t", storetest.Msg("user", "@claude hi"))
	if _, err := s.RegisterCoordinator(ctx, agentbridge.Registration{ID: "laptop", Instance: "i1", Host: "laptop", TTLMillis: 60000,
		Agents: []agentbridge.CoordinatorAgent{{Name: "claude", Client: "claude", Kind: agentbridge.AgentKindAdapter}}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Claim(ctx, agentbridge.ClaimRequest{ClaimKey: agentbridge.ClaimKey{Thread: "t", Event: trigger.ID, Participant: "claude"},
		Coordinator: "laptop", Instance: "i1"})
	if err != nil || !res.Granted {
		t.Fatalf("claim: %+v %v", res, err)
	}
	// Another transaction holds the claim's row, as a receipt being
	// stored under its fence does.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	hold, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(ctx) }()
	if _, err := hold.Exec(ctx, `SELECT 1 FROM claims WHERE id = $1 FOR UPDATE`, res.Claim.ID); err != nil {
		t.Fatal(err)
	}
	// The claim's reply: the writer locks the thread, then waits for the
	// claim.
	appended := make(chan error, 1)
	go func() {
		in := storetest.Msg("claude", "the reply")
		in.Meta.ReplyTo = trigger.ID
		_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: in,
			Fence: &agentbridge.ClaimFence{ID: res.Claim.ID, Fence: res.Claim.Fence, Coordinator: "laptop"}})
		appended <- err
	}()
	testutil.WaitFor(t, 30*time.Second, "the writer to wait for the claim", func() bool {
		var n int
		_ = s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM claims WHERE id%'`).Scan(&n)
		return n > 0
	})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, _, err := s.PutReceipt(rctx, agentbridge.ReceiptInput{Thread: "t", Event: trigger.ID, Participant: "codex",
		From: "laptop", State: agentbridge.ReceiptQueued}); err != nil {
		t.Errorf("a receipt while the writer holds its thread: %v, want it stored at once", err)
	}
	_ = hold.Rollback(ctx)
	if err := <-appended; err != nil {
		t.Errorf("the fenced reply: %v", err)
	}
}

// TestDeadlockRetried: two transactions that lock two rows in opposite
// orders deadlock; PostgreSQL fails one of them (40P01), and the store
// runs it again, so both commit and the caller sees no error.
func TestDeadlockRetried(t *testing.T) {
	t.Parallel()
	s := openStore(t, pg.Database(t), Options{})
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `CREATE TABLE scratch (id int PRIMARY KEY, n int NOT NULL); INSERT INTO scratch VALUES (1, 0), (2, 0)`); err != nil {
		t.Fatal(err)
	}
	var both sync.WaitGroup
	both.Add(2)
	var tries atomic.Int64
	run := func(first, second int) error {
		once := sync.OnceFunc(both.Done)
		return s.inTx(ctx, func(tx pgx.Tx) error {
			tries.Add(1)
			if _, err := tx.Exec(ctx, `UPDATE scratch SET n = n + 1 WHERE id = $1`, first); err != nil {
				return err
			}
			// Each waits until the other holds its first row, once.
			once()
			both.Wait()
			_, err := tx.Exec(ctx, `UPDATE scratch SET n = n + 1 WHERE id = $1`, second)
			return err
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- run(1, 2) }()
	go func() { errs <- run(2, 1) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("a transaction failed: %v", err)
		}
	}
	var a, b int
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT n FROM scratch WHERE id = 1), (SELECT n FROM scratch WHERE id = 2)`).Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	if a != 2 || b != 2 || tries.Load() < 3 {
		t.Errorf("rows %d and %d after %d tries; want 2 and 2, one transaction run again", a, b, tries.Load())
	}
	if retryable(errors.New("deadlock detected")) {
		t.Error("a plain error taken for PostgreSQL's deadlock")
	}
}
