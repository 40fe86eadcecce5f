package ui_test

import (
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// leafModules are the UI's leaf modules: a view imports only these, and
// they import only each other (and static/vendor). app.js is the one module
// that imports the views; it hands each the others' functions through
// hooks.js.
var leafModules = []string{"api", "dom", "shared", "markdown", "controls", "hooks"}

// importFrom matches the module of a static import or re-export, over
// several lines if need be.
var importFrom = regexp.MustCompile(`(?m)^(?:import|export)\s[^;]*?from\s*"([^"]+)"|^import\s*"([^"]+)"`)

// moduleImports reads the imports of every static/*.js: module name (file
// name without .js) to the names of the modules it imports; vendor files
// are left out (they import nothing of ours).
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("static", "*.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no static/*.js: %v", err)
	}
	graph := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".js")
		graph[name] = []string{}
		for _, m := range importFrom.FindAllStringSubmatch(string(b), -1) {
			spec := m[1] + m[2]
			if strings.HasPrefix(spec, "./vendor/") {
				continue
			}
			if !strings.HasPrefix(spec, "./") || strings.Count(spec, "/") != 1 {
				t.Errorf("%s imports %q: the UI's modules import each other as ./name.js", f, spec)
				continue
			}
			graph[name] = append(graph[name], strings.TrimSuffix(path.Base(spec), ".js"))
		}
	}
	return graph
}

// moduleProblems is every rule of the import graph that g breaks: a cycle,
// a leaf importing a non-leaf, a view importing anything but a leaf.
func moduleProblems(g map[string][]string) []string {
	var out []string
	leaf := func(m string) bool { return slices.Contains(leafModules, m) }
	for _, m := range slices.Sorted(maps.Keys(g)) {
		for _, d := range g[m] {
			switch {
			case m == "app":
			case leaf(m) && !leaf(d):
				out = append(out, "leaf module "+m+".js imports "+d+".js, which is not a leaf")
			case !leaf(m) && !leaf(d):
				out = append(out, "view "+m+".js imports view "+d+".js: take its function from hooks.js (app.js fills it)")
			}
		}
	}
	// A cycle: depth-first, a module met again while on the path.
	state := map[string]int{} // 0 unseen, 1 on the path, 2 done
	var walk func(m string, trail []string)
	walk = func(m string, trail []string) {
		state[m] = 1
		for _, d := range g[m] {
			switch state[d] {
			case 1:
				i := slices.Index(trail, d)
				out = append(out, "cycle: "+strings.Join(append(slices.Clone(trail[i:]), d), " → "))
			case 0:
				walk(d, append(trail, d))
			}
		}
		state[m] = 2
	}
	for _, m := range slices.Sorted(maps.Keys(g)) {
		if state[m] == 0 {
			walk(m, []string{m})
		}
	}
	return out
}

// TestModuleGraph: the UI's ES modules import one another without a cycle,
// and a view imports only leaf modules (docs/ui.md, "Modules").
func TestModuleGraph(t *testing.T) {
	t.Parallel()
	g := moduleImports(t)
	if len(g["app"]) < 10 || !slices.Contains(g["thread"], "hooks") {
		t.Fatalf("the import lines were not read: app.js → %v, thread.js → %v", g["app"], g["thread"])
	}
	for _, p := range moduleProblems(g) {
		t.Error(p)
	}
}

// TestModuleProblems: the check itself finds a cycle among views, a view
// importing a view and a leaf importing a view.
func TestModuleProblems(t *testing.T) {
	t.Parallel()
	g := map[string][]string{
		"app":    {"thread", "events"},
		"thread": {"dom", "events"},
		"events": {"thread"},
		"shared": {"panel"},
		"panel":  {"shared"},
		"dom":    {},
	}
	got := strings.Join(moduleProblems(g), "\n")
	for _, want := range []string{
		"view thread.js imports view events.js",
		"view events.js imports view thread.js",
		"leaf module shared.js imports panel.js",
		"cycle: thread → events → thread",
		"cycle: panel → shared → panel",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q; got:\n%s", want, got)
		}
	}
}
