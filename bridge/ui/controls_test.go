package ui_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// parseControlKeys returns the control keys agentbridge.ParseControl knows:
// the string cases of the switch in its body (state.go at the module root).
func parseControlKeys(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "state.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "ParseControl" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			if cc, ok := n.(*ast.CaseClause); ok {
				for _, e := range cc.List {
					if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						if k, err := strconv.Unquote(lit.Value); err == nil {
							keys = append(keys, k)
						}
					}
				}
			}
			return true
		})
	}
	if len(keys) < 10 {
		t.Fatalf("found only %v in ParseControl's switch; has it moved?", keys)
	}
	return keys
}

// sentenceKeys returns the keys of controls.js's CONTROL_SENTENCES table.
func sentenceKeys(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("static", "controls.js"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "export const CONTROL_SENTENCES = {")
	end := strings.Index(s[start:], "\n};")
	if start < 0 || end < 0 {
		t.Fatal("controls.js has no CONTROL_SENTENCES table")
	}
	var keys []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z_]+): `).FindAllStringSubmatch(s[start:start+end], -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// TestEveryControlHasASentence: every control key the fold knows, and the
// permission answer of ACP agents (contract 6.6), has its sentence in the
// UI's one table, so no control event is ever shown as JSON.
func TestEveryControlHasASentence(t *testing.T) {
	have := sentenceKeys(t)
	for _, k := range append(parseControlKeys(t), "permission") {
		if !slices.Contains(have, k) {
			t.Errorf("control %q has no sentence in static/controls.js CONTROL_SENTENCES", k)
		}
	}
}
