package agentbridge_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/agent-bridge/agent-bridge"

// TestDependencyArrows keeps the package layout honest: the domain package
// stays stdlib-only, the daemons talk to each other only over HTTP, each
// technology stays in its own package, and no package but the test kit's
// own reaches internal/testkit.
func TestDependencyArrows(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not on PATH")
	}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Deps,Standard", "./...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath string
		Deps       []string
		Standard   bool
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list: %v", err)
		}
		pkgs[p.ImportPath] = p
	}
	std := func(path string) bool { return pkgs[path].Standard }

	// forbidden[pkg prefix] = dependency prefixes it must not reach.
	forbidden := map[string][]string{
		module + "/bridge":      {module + "/coordinator", "github.com/kardianos/service"},
		module + "/client":      {module + "/bridge", module + "/coordinator", "github.com/mattn/go-sqlite3", "github.com/jackc/pgx"},
		module + "/coordinator": {module + "/bridge", "github.com/kardianos/service"},
		module + "/adapters":    {module + "/bridge", module + "/coordinator", "github.com/mattn/go-sqlite3", "github.com/jackc/pgx"},
		module + "/mcpserver":   {module + "/bridge", module + "/coordinator", "github.com/mattn/go-sqlite3", "github.com/jackc/pgx"},
		// Each store stands alone: neither pulls in the other's driver.
		module + "/bridge/sqlite":   {"github.com/jackc/pgx"},
		module + "/bridge/postgres": {"github.com/mattn/go-sqlite3", module + "/bridge/sqlite"},
	}
	for path, p := range pkgs {
		if !strings.HasPrefix(path, module) {
			continue
		}
		if path == module {
			for _, d := range p.Deps {
				if !std(d) {
					t.Errorf("the root package must import only the standard library, but reaches %s", d)
				}
			}
		}
		for prefix, bad := range forbidden {
			if path != prefix && !strings.HasPrefix(path, prefix+"/") {
				continue
			}
			for _, d := range p.Deps {
				for _, b := range bad {
					if d == b || strings.HasPrefix(d, b+"/") {
						t.Errorf("%s must not depend on %s", path, d)
					}
				}
			}
		}
		if !strings.HasPrefix(path, module+"/mcpserver") && !strings.HasPrefix(path, module+"/cmd/") {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, "github.com/modelcontextprotocol/") {
					t.Errorf("only package mcpserver may import the MCP SDK; %s does", path)
				}
			}
		}
		// Test support stands apart: what ships never reaches the test kit
		// (a package's own tests may; go list -deps lists non-test builds).
		if kit := module + "/internal/testkit"; !strings.HasPrefix(path, kit+"/") {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, kit+"/") {
					t.Errorf("%s is not test support but depends on %s: only tests may import internal/testkit", path, d)
				}
			}
		}
		if !strings.HasPrefix(path, module+"/internal/service") && !strings.HasPrefix(path, module+"/cmd/") {
			for _, d := range p.Deps {
				if strings.HasPrefix(d, "github.com/kardianos/service") {
					t.Errorf("only package internal/service may import kardianos/service; %s does", path)
				}
			}
		}
	}
}

// TestGoModHasNoReplace keeps builds reproducible from the module proxy.
func TestGoModHasNoReplace(t *testing.T) {
	t.Parallel()
	f, err := os.Open("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(strings.TrimSpace(sc.Text()), "replace") {
			t.Errorf("go.mod has a replace directive: %q", sc.Text())
		}
	}
}

// TestPackageDocs requires a package doc comment on every package.
func TestPackageDocs(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Doc}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, doc, _ := strings.Cut(line, "\t")
		if strings.TrimSpace(doc) == "" {
			t.Errorf("package %s has no package doc comment", path)
		}
	}
}
