package main

import (
	"strings"
	"testing"
)

// TestHelpEverywhere checks that help is asked for in every way and every
// command without an error: exit 0, the usage on stdout, with positional
// arguments, flags and environment variables.
func TestHelpEverywhere(t *testing.T) {
	t.Parallel()
	c := cli{t: t, env: map[string]string{}}
	root := (&Main{Getenv: func(string) string { return "" }}).rootCommand()
	var paths [][]string
	for _, sub := range root.Commands() {
		paths = append(paths, []string{sub.Name()})
		for _, s2 := range sub.Commands() {
			paths = append(paths, []string{sub.Name(), s2.Name()})
		}
	}
	for _, p := range paths {
		for _, form := range [][]string{append(append([]string{}, p...), "--help"), append(append([]string{}, p...), "-h"), append([]string{"help"}, p...)} {
			out, errOut, code := c.run(form...)
			if code != 0 || !strings.Contains(out, "Usage:") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0 and the usage", form, code, out, errOut)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"post", "--help"}, []string{"post THREAD TEXT...", "--to", "BRIDGE_URL", "BRIDGE_TOKEN"}},
		{[]string{"thread", "--help"}, []string{"new", "list", "rename"}},
		{[]string{"invocations", "--help"}, []string{"show", "cancel", "BRIDGE_COORDINATOR_URL"}},
		{[]string{"up", "--help"}, []string{"--status-addr", "--humans", "--token-file", "BRIDGE_ADDR"}},
		{[]string{"help"}, []string{"thread", "completion", "Environment:", "BRIDGE_TOKEN", "BRIDGE_COORDINATOR_URL", "BRIDGE_DB"}},
	} {
		out := c.ok(tc.args...)
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: no %q in\n%s", tc.args, w, out)
			}
		}
	}
}

// TestTypoSuggestions checks that a mistyped command or subcommand exits 2
// naming the nearest one.
func TestTypoSuggestions(t *testing.T) {
	t.Parallel()
	c := cli{t: t, env: map[string]string{}}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"thred", "list"}, `did you mean "thread"?`},
		{[]string{"thread", "lsit"}, `did you mean "list"?`},
		{[]string{"invocatoins"}, `did you mean "invocations"?`},
	} {
		_, errOut, code := c.run(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 with %q", tc.args, code, errOut, tc.want)
		}
	}
}

// TestGoStyleFlags checks that single-dash long flags, as the Go flag
// package read them, still work: scripts and installed service
// definitions use them.
func TestGoStyleFlags(t *testing.T) {
	t.Parallel()
	c := cli{t: t, env: map[string]string{}}
	_, errOut, code := c.run("thread", "list", "-url", "ftp://x")
	if code != 2 || !strings.Contains(errOut, `--url: "ftp://x"`) {
		t.Errorf("thread list -url ftp://x: exit %d, stderr %q; want the --url refusal", code, errOut)
	}
	_, errOut, code = c.run("thread", "list", "-limit=-3")
	if code != 2 || !strings.Contains(errOut, "--limit") {
		t.Errorf("thread list -limit=-3: exit %d, stderr %q", code, errOut)
	}
}

// TestVersion checks that version names the Go version from the build info.
func TestVersion(t *testing.T) {
	t.Parallel()
	c := cli{t: t, env: map[string]string{}}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out := c.ok(args...)
		if !strings.HasPrefix(out, "agent-bridge ") || !strings.Contains(out, "go1.") || !strings.Contains(out, "revision") {
			t.Errorf("%v = %q; want the version, revision and Go version", args, out)
		}
	}
}

// TestCompleteThread checks that a THREAD argument completes to the
// bridge's thread ids, with their names, found through BRIDGE_URL.
func TestCompleteThread(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "design review", "--id", "plan")
	for _, args := range [][]string{{"__complete", "tail", ""}, {"__complete", "post", ""}, {"__complete", "thread", "rename", ""}} {
		out := c.ok(args...)
		if !strings.Contains(out, "plan\tdesign review") {
			t.Errorf("%v:\n%s", args, out)
		}
	}
	if out := c.ok("__complete", "post", "plan", ""); strings.Contains(out, "plan\t") {
		t.Errorf("TEXT completed as a thread:\n%s", out)
	}
}
