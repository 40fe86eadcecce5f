package ui_test

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// leafModules are the UI's leaf modules: a view imports only these, and
// they import only each other (and static/vendor). app.js is the one module
// that imports the views; the views talk through bus.js.
var leafModules = []string{"api", "dom", "shared", "markdown", "controls", "bus"}

// importFrom matches the module of a static import or re-export, over
// several lines if need be.
var importFrom = regexp.MustCompile(`(?m)^(?:import|export)\s[^;]*?from\s*"([^"]+)"|^import\s*"([^"]+)"`)

// moduleSources reads every static/*.js: module name (file name without
// .js) to its text; vendor files are left out (they import nothing of
// ours).
func moduleSources(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("static", "*.js"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no static/*.js: %v", err)
	}
	src := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src[strings.TrimSuffix(filepath.Base(f), ".js")] = string(b)
	}
	return src
}

// moduleImports is the import graph of src: module name to the names of
// the modules it imports.
func moduleImports(t *testing.T, src map[string]string) map[string][]string {
	t.Helper()
	graph := map[string][]string{}
	for name, text := range src {
		graph[name] = []string{}
		for _, m := range importFrom.FindAllStringSubmatch(text, -1) {
			spec := m[1] + m[2]
			if strings.HasPrefix(spec, "./vendor/") {
				continue
			}
			if !strings.HasPrefix(spec, "./") || strings.Count(spec, "/") != 1 {
				t.Errorf("%s.js imports %q: the UI's modules import each other as ./name.js", name, spec)
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
				out = append(out, "view "+m+".js imports view "+d+".js: talk to it through the bus (bus.js)")
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
// a view imports only leaf modules, and no two views talk to each other
// both ways, by any route this can read (docs/ui.md, "Modules").
func TestModuleGraph(t *testing.T) {
	t.Parallel()
	src := moduleSources(t)
	g := moduleImports(t, src)
	if len(g["app"]) < 10 || !slices.Contains(g["thread"], "shared") {
		t.Fatalf("the import lines were not read: app.js → %v, thread.js → %v", g["app"], g["thread"])
	}
	for _, p := range moduleProblems(g) {
		t.Error(p)
	}
	talk, problems := viewTalk(src, g)
	for _, p := range problems {
		t.Error(p)
	}
	// The reading itself: thread.js has events.js draw each event.
	if len(talk["thread"]["events"]) == 0 {
		t.Fatalf("how views talk was not read: nothing from thread.js to events.js")
	}
	for _, p := range talkProblems(talk) {
		t.Error(p)
	}
	routes := 0
	for _, from := range slices.Sorted(maps.Keys(talk)) {
		for _, to := range slices.Sorted(maps.Keys(talk[from])) {
			routes++
			if testing.Verbose() {
				t.Logf("%s → %s by %s", from, to, strings.Join(talk[from][to], ", "))
			}
		}
	}
	t.Logf("%d view→view routes, %d pairs both ways", routes, len(talkProblems(talk)))
	// The store's changes (shared.js) are not a view's: a view changes the
	// state and the views that follow it redraw. Said here, to be seen.
	via := storeTalk(src)
	for _, from := range slices.Sorted(maps.Keys(via)) {
		for _, to := range slices.Sorted(maps.Keys(via[from])) {
			t.Logf("through the store: %s → %s by %s", from, to, strings.Join(via[from][to], ", "))
			if talk[from] == nil {
				talk[from] = map[string][]string{}
			}
			talk[from][to] = append(talk[from][to], via[from][to]...)
		}
	}
	for _, p := range talkProblems(talk) {
		t.Logf("counting the store's changes too, %s", p)
	}
}

// storeTalk is who talks to whom through a leaf's function that publishes
// on the bus (the store's changes: shared.js loadState, setCursor): the
// view that calls it → each view that subscribes to what it publishes.
func storeTalk(src map[string]string) map[string]map[string][]string {
	leaf := func(m string) bool { return slices.Contains(leafModules, m) }
	// What each leaf function publishes, itself or through another
	// function of its module it calls.
	says := map[[2]string][]string{}
	bodies := map[[2]string]string{}
	for m, text := range src {
		if !leaf(m) {
			continue
		}
		for _, loc := range exportFunc.FindAllStringSubmatchIndex(text, -1) {
			body, _, _ := strings.Cut(text[loc[0]:], "\n}\n")
			bodies[[2]string{m, text[loc[2]:loc[3]]}] = body
		}
		for local, b := range bindings(text) {
			if b[0] != "bus" || b[1] != "publish" {
				continue
			}
			re := regexp.MustCompile(`(?:^|[^\w.$])` + regexp.QuoteMeta(local) + `\(\s*"([^"]*)"`)
			for k, body := range bodies {
				if k[0] != m {
					continue
				}
				for _, c := range re.FindAllStringSubmatch(body, -1) {
					says[k] = append(says[k], c[1])
				}
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for k, body := range bodies {
			for o, msgs := range says {
				if o[0] != k[0] || o == k || !regexp.MustCompile(`(?:^|[^\w.$])`+o[1]+`\(`).MatchString(body) {
					continue
				}
				for _, x := range msgs {
					if !slices.Contains(says[k], x) {
						says[k] = append(says[k], x)
						changed = true
					}
				}
			}
		}
	}
	hears := map[string][]string{}
	for m, text := range src {
		for local, b := range bindings(text) {
			if b[0] == "bus" && b[1] == "subscribe" {
				for _, c := range regexp.MustCompile(`(?:^|[^\w.$])`+regexp.QuoteMeta(local)+`\(\s*"([^"]*)"`).FindAllStringSubmatch(text, -1) {
					hears[c[1]] = append(hears[c[1]], m)
				}
			}
		}
	}
	out := map[string]map[string][]string{}
	for _, m := range slices.Sorted(maps.Keys(src)) {
		if leaf(m) || m == "app" {
			continue
		}
		for local, b := range bindings(src[m]) {
			msgs := says[b]
			if len(msgs) == 0 || !regexp.MustCompile(`(?:^|[^\w.$])`+regexp.QuoteMeta(local)+`\(`).MatchString(src[m]) {
				continue
			}
			for _, x := range msgs {
				for _, to := range hears[x] {
					if to == m || leaf(to) || to == "app" {
						continue
					}
					if out[m] == nil {
						out[m] = map[string][]string{}
					}
					how := fmt.Sprintf("%s.js %s → %q", b[0], b[1], x)
					if !slices.Contains(out[m][to], how) {
						out[m][to] = append(out[m][to], how)
					}
				}
			}
		}
	}
	return out
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

// What the talk graph reads: a module's exports, its imported bindings,
// the bus's declared messages and calls, and DOM events of our own.
var (
	exportDecl   = regexp.MustCompile(`(?m)^export\s+(?:async\s+)?(?:function\s*\*?|const|let|var|class)\s*(\w+)`)
	exportList   = regexp.MustCompile(`(?m)^export\s*\{([^}]*)\}`)
	importClause = regexp.MustCompile(`(?ms)^import\s+([^;]*?)\s+from\s*"\./([\w-]+)\.js"`)
	messageDecl  = regexp.MustCompile(`(?m)^\s*"?([\w-]+)"?\s*:`)
	customEvent  = regexp.MustCompile(`new\s+CustomEvent\(\s*"([^"]+)"`)
	listener     = regexp.MustCompile(`addEventListener\(\s*"([^"]+)"`)
	exportFunc   = regexp.MustCompile(`(?m)^export\s+(?:async\s+)?function\s+(\w+)`)
)

// bindings is what a module's import lines bind: local name to the module
// it comes from and the name it has there ("*" for a namespace).
func bindings(text string) map[string][2]string {
	out := map[string][2]string{}
	for _, m := range importClause.FindAllStringSubmatch(text, -1) {
		clause, from := strings.TrimSpace(m[1]), m[2]
		if ns, ok := strings.CutPrefix(clause, "* as "); ok {
			out[strings.TrimSpace(ns)] = [2]string{from, "*"}
			continue
		}
		if i := strings.Index(clause, "{"); i >= 0 {
			if def := strings.Trim(strings.TrimSpace(clause[:i]), ","); def != "" {
				out[strings.TrimSpace(def)] = [2]string{from, "default"}
			}
			for _, part := range strings.Split(strings.Trim(clause[i:], "{} \n"), ",") {
				orig, local, found := strings.Cut(strings.TrimSpace(part), " as ")
				if !found {
					local = orig
				}
				if local = strings.TrimSpace(local); local != "" {
					out[local] = [2]string{from, strings.TrimSpace(orig)}
				}
			}
			continue
		}
		out[clause] = [2]string{from, "default"}
	}
	return out
}

// exportsOf is the names a module exports.
func exportsOf(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range exportDecl.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	for _, m := range exportList.FindAllStringSubmatch(text, -1) {
		for _, part := range strings.Split(m[1], ",") {
			_, name, found := strings.Cut(part, " as ")
			if !found {
				name = part
			}
			if name = strings.TrimSpace(name); name != "" {
				out[name] = true
			}
		}
	}
	return out
}

// viewTalk is who talks to whom among the views (every module but app.js
// and the leaves), by each route it can read: from → to → how. A view
// talks to another when it
//   - imports it;
//   - calls a function the other exports through an object it imported
//     from elsewhere (as hooks.js carried them: hooks.senderLabel(…));
//   - publishes a message on the bus (bus.js) that the other subscribes
//     to;
//   - dispatches a CustomEvent of ours that the other listens for.
//
// problems are what keeps it from reading the bus: a message named by
// anything but a string, one bus.js does not declare, one nobody
// publishes or nobody hears.
func viewTalk(src map[string]string, g map[string][]string) (talk map[string]map[string][]string, problems []string) {
	view := func(m string) bool { return m != "app" && !slices.Contains(leafModules, m) }
	talk = map[string]map[string][]string{}
	say := func(from, to, how string) {
		if from == to || !view(from) || !view(to) {
			return
		}
		if talk[from] == nil {
			talk[from] = map[string][]string{}
		}
		if !slices.Contains(talk[from][to], how) {
			talk[from][to] = append(talk[from][to], how)
		}
	}
	exports := map[string]map[string]bool{}
	for m, text := range src {
		exports[m] = exportsOf(text)
	}
	for _, m := range slices.Sorted(maps.Keys(src)) {
		for _, d := range g[m] {
			say(m, d, "import")
		}
	}
	// Calls through an imported object.
	for _, m := range slices.Sorted(maps.Keys(src)) {
		for local, b := range bindings(src[m]) {
			re := regexp.MustCompile(`(?:^|[^\w.$])` + regexp.QuoteMeta(local) + `\s*\.\s*(\w+)`)
			for _, c := range re.FindAllStringSubmatch(src[m], -1) {
				if exports[b[0]][c[1]] {
					continue
				}
				for _, v := range slices.Sorted(maps.Keys(exports)) {
					if exports[v][c[1]] {
						say(m, v, local+"."+c[1])
					}
				}
			}
		}
	}
	// The bus.
	declared := map[string]bool{}
	if text, ok := src["bus"]; ok {
		if i := strings.Index(text, "export const MESSAGES = {"); i >= 0 {
			block, _, _ := strings.Cut(text[i:], "\n};")
			for _, m := range messageDecl.FindAllStringSubmatch(block, -1) {
				declared[m[1]] = true
			}
		}
	}
	pub, sub := map[string][]string{}, map[string][]string{}
	for _, m := range slices.Sorted(maps.Keys(src)) {
		for local, b := range bindings(src[m]) {
			if b[0] != "bus" || (b[1] != "publish" && b[1] != "subscribe") {
				continue
			}
			re := regexp.MustCompile(`(?:^|[^\w.$])` + regexp.QuoteMeta(local) + `\(\s*("([^"]*)"|[^,)]*)`)
			for _, c := range re.FindAllStringSubmatch(src[m], -1) {
				if c[2] == "" {
					problems = append(problems, fmt.Sprintf("%s.js: %s(%s…): name a bus message with a string, so that who talks to whom can be read", m, local, c[1]))
					continue
				}
				if !declared[c[2]] {
					problems = append(problems, fmt.Sprintf("%s.js: %s(%q): bus.js's MESSAGES does not declare it", m, local, c[2]))
				}
				if b[1] == "publish" {
					pub[c[2]] = append(pub[c[2]], m)
				} else {
					sub[c[2]] = append(sub[c[2]], m)
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(declared)) {
		switch {
		case len(pub[name]) == 0:
			problems = append(problems, fmt.Sprintf("bus message %q: nobody publishes it", name))
		case len(sub[name]) == 0:
			problems = append(problems, fmt.Sprintf("bus message %q: nobody subscribes to it", name))
		}
		for _, p := range pub[name] {
			for _, s := range sub[name] {
				say(p, s, strconv.Quote(name))
			}
		}
	}
	// CustomEvents of our own, on the document or elsewhere.
	for _, m := range slices.Sorted(maps.Keys(src)) {
		for _, c := range customEvent.FindAllStringSubmatch(src[m], -1) {
			for _, l := range slices.Sorted(maps.Keys(src)) {
				for _, e := range listener.FindAllStringSubmatch(src[l], -1) {
					if e[1] == c[1] {
						say(m, l, "CustomEvent "+strconv.Quote(c[1]))
					}
				}
			}
		}
	}
	return talk, problems
}

// talkProblems is every pair of views that talk to each other both ways.
func talkProblems(talk map[string]map[string][]string) []string {
	var out []string
	for _, a := range slices.Sorted(maps.Keys(talk)) {
		for _, b := range slices.Sorted(maps.Keys(talk[a])) {
			if a < b && talk[b][a] != nil {
				out = append(out, fmt.Sprintf("views %s.js and %s.js talk both ways: %s → %s by %s; %s → %s by %s",
					a, b, a, b, strings.Join(talk[a][b], ", "), b, a, strings.Join(talk[b][a], ", ")))
			}
		}
	}
	return out
}

// TestTalkProblems: the check finds two views that talk both ways through
// the bus and through an object of functions (as hooks.js was), reads a
// CustomEvent as talk, and finds bus messages it cannot read, does not
// know, or that nobody publishes.
func TestTalkProblems(t *testing.T) {
	t.Parallel()
	src := map[string]string{
		"bus":    "export const MESSAGES = {\n  opened: \"a thread opened\",\n  \"tap-row\": \"a row was tapped\",\n  lonely: \"heard, never said\",\n};\n",
		"shared": "export const reg = {};\n",
		"thread": "import { publish, subscribe } from \"./bus.js\";\nimport { reg } from \"./shared.js\";\nexport function openThread() {}\npublish(\"opened\", {});\nsubscribe(\"tap-row\", f);\nreg.drawCard();\n",
		"list":   "import {\n  subscribe,\n  publish as say,\n} from \"./bus.js\";\nsubscribe(\"opened\", g);\nsubscribe(\"lonely\", g);\nsay(\"tap-row\", {});\nsay(name, {});\nsay(\"nope\");\n",
		"cards":  "import { reg } from \"./shared.js\";\nexport async function drawCard() {}\nreg.openThread(1);\ndocument.addEventListener(\"poke\", h);\n",
		"events": "document.dispatchEvent(new CustomEvent(\"poke\", {}));\n",
	}
	talk, problems := viewTalk(src, moduleImports(t, src))
	got := strings.Join(append(problems, talkProblems(talk)...), "\n")
	for _, want := range []string{
		`views list.js and thread.js talk both ways: list → thread by "tap-row"; thread → list by "opened"`,
		`views cards.js and thread.js talk both ways: cards → thread by reg.openThread; thread → cards by reg.drawCard`,
		`list.js: say(name…): name a bus message with a string`,
		`list.js: say("nope"): bus.js's MESSAGES does not declare it`,
		`bus message "lonely": nobody publishes it`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q; got:\n%s", want, got)
		}
	}
	if !slices.Equal(talk["events"]["cards"], []string{`CustomEvent "poke"`}) || strings.Contains(got, "events.js and") {
		t.Errorf("events.js → cards.js by its CustomEvent, one way: %v\n%s", talk["events"], got)
	}
}
