package rules_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRulesArePure keeps the decision free of I/O: the package must not
// reach the bridge client, the ledger, HTTP, subprocesses or SQL, so that
// every coordinator decides the same from the same thread and the rules
// test without a process or a network.
func TestRulesArePure(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not on PATH")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/agent-bridge/agent-bridge"
	forbidden := []string{module + "/client", module + "/coordinator/ledger", "net/http", "os/exec", "database/sql"}
	for _, d := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("coordinator/rules must stay pure, but reaches %s", d)
			}
		}
	}
}
