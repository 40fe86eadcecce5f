package acp_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestACPHasItsOwnRequestTypes keeps the ACP client off the coordinator's
// ledger: a turn arrives as the client's own Run and Invocation, converted
// at the coordinator's edge, so the client does not change with the
// ledger's rows (and runs and is tested without a database).
func TestACPHasItsOwnRequestTypes(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not on PATH")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/agent-bridge/agent-bridge"
	forbidden := []string{module + "/coordinator/ledger", "database/sql"}
	for _, d := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("coordinator/acp must not depend on the ledger, but reaches %s", d)
			}
		}
	}
}
