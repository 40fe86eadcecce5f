package ledger_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// TestLeasePerCoordinatorID: the lease is one per coordinator id, so
// coordinators "laptop" and "server" on one PostgreSQL ledger both hold
// theirs at once, while a second process of "laptop" stands by until the
// first releases it.
func TestLeasePerCoordinatorID(t *testing.T) {
	if os.Getenv(dialectEnv) != "postgres" {
		t.Skip("a lease is PostgreSQL's; runs in the PostgreSQL pass")
	}
	url := ledgerPath(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	take := func(id string) *ledger.Lease {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := ledger.AcquireLease(c, url, id, log)
		if err != nil {
			t.Fatalf("lease of %s: %v", id, err)
		}
		return l
	}
	laptop, server := take("laptop"), take("server")
	defer server.Release()
	c, cancel := context.WithTimeout(ctx, 2*ledger.LeasePoll)
	defer cancel()
	if l, err := ledger.AcquireLease(c, url, "laptop", log); !errors.Is(err, context.DeadlineExceeded) {
		if l != nil {
			l.Release()
		}
		t.Fatalf("a second laptop took the lease (%v) while the first held it", err)
	}
	if err := laptop.Release(); err != nil {
		t.Fatal(err)
	}
	take("laptop").Release()
}
