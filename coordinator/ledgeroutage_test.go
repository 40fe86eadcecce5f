package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestLedgerOutageIgnoresCancelledWrites: a write cancelled by its caller
// (the follow loop's commit at shutdown) is not the ledger refusing it, so
// it logs no outage; a refused write still starts one, logged once, and
// the next success ends it.
func TestLedgerOutageIgnoresCancelledWrites(t *testing.T) {
	var logs strings.Builder
	o := &ledgerOutage{log: slog.New(slog.NewTextHandler(&logs, nil))}
	o.failed("commit the events read", fmt.Errorf("begin: %w", context.Canceled))
	o.ok()
	if logs.Len() != 0 {
		t.Fatalf("a cancelled write logged:\n%s", logs.String())
	}
	full := errors.New("database or disk is full")
	o.failed("record an invocation's outcome", full)
	o.failed("commit the events read", full)
	o.failed("commit the events read", fmt.Errorf("begin: %w", context.Canceled))
	o.ok()
	if n := strings.Count(logs.String(), "the ledger refuses writes"); n != 1 {
		t.Errorf("outage start logged %d times, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "refused_writes=2") {
		t.Errorf("the end of the outage does not count the 2 refused writes:\n%s", logs.String())
	}
}
