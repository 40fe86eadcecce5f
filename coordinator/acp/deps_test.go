package acp_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestACPHasItsOwnRequestTypes keeps the ACP client off the coordinator's
// ledger: a turn arrives as the client's own Run and Invocation, converted
// at the coordinator's edge, so the client does not change with the
// ledger's rows (and runs and is tested without a database). No file of
// the package, its tests included, imports the ledger.
func TestACPHasItsOwnRequestTypes(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("list the package's files: %v (%d found)", err, len(files))
	}
	const ledger = "github.com/agent-bridge/agent-bridge/coordinator/ledger"
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == ledger || strings.HasPrefix(path, ledger+"/") || path == "database/sql" {
				t.Errorf("%s imports %s: coordinator/acp must not depend on the ledger", name, path)
			}
		}
	}
}
