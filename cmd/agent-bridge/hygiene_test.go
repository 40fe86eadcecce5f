package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

// hostile is a message that, printed raw, retitles the terminal (OSC 0)
// and clears it (CSI 2J), with a C1 CSI and a carriage return for good
// measure.
const hostile = "\u001b]0;PWNED\u0007\u001b[2J and \u009b31m red\r over"

// TestTailEscapesControls posts a message full of terminal controls and
// checks that tail shows every one as a visible escape, that no control
// byte reaches stdout, and that --json still carries the content exactly.
func TestTailEscapesControls(t *testing.T) {
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "t", "--id", "T")
	c.ok("post", "T", hostile)

	var out, errb testutil.Buffer
	stop := runTailAsync(t, c.env, &out, &errb, "T")
	testutil.WaitFor(t, 20*time.Second, "tail to print the message", func() bool { return strings.Contains(out.String(), "over") })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{`\x1b]0;PWNED\x07\x1b[2J`, `\u009b31m red\x0d over`} {
		if !strings.Contains(got, want) {
			t.Errorf("tail output lacks %q:\n%s", want, got)
		}
	}
	if hasControl(got) {
		t.Errorf("tail wrote a control character: %q", got)
	}

	var jout, jerr testutil.Buffer
	stop = runTailAsync(t, c.env, &jout, &jerr, "T", "--json")
	testutil.WaitFor(t, 20*time.Second, "tail --json to print the message", func() bool { return strings.Contains(jout.String(), "over") })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(jout.String()), "\n") {
		var e agentbridge.Event
		if err := jsonUnmarshal(line, &e); err != nil {
			t.Fatalf("tail --json line %q: %v", line, err)
		}
		found = found || e.Text() == hostile
	}
	if !found {
		t.Errorf("tail --json did not carry the content unchanged:\n%s", jout.String())
	}

	// The other text outputs go through the same writer.
	c.ok("thread", "rename", "T", "\u001b[2Jnamed")
	if out := c.ok("thread", "list"); hasControl(out) || !strings.Contains(out, `\x1b[2Jnamed`) {
		t.Errorf("thread list = %q; want the name escaped", out)
	}
}

// hasControl reports a control character other than newline and tab.
func hasControl(s string) bool {
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}

// TestEscaper checks the escaping writer byte by byte, including a UTF-8
// sequence split across two writes and bytes that are not UTF-8.
func TestEscaper(t *testing.T) {
	var buf bytes.Buffer
	w := newEscaper(&buf)
	for _, p := range [][]byte{[]byte("a\tb\nc\x00d\x7fé "), {0xc2}, {0x9b, 'x', ' ', 0xff, ' '}, []byte("→ ok")} {
		if n, err := w.Write(p); err != nil || n != len(p) {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if got, want := buf.String(), "a\tb\nc\\x00d\\x7fé \\u009bx \\xff → ok"; got != want {
		t.Errorf("escaped %q, want %q", got, want)
	}
}

// TestMaskURL checks that database URLs lose their secrets in messages and
// logs, and that everything else is left as it is.
func TestMaskURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://user:secret@db:5432/ab?sslmode=disable":    "postgres://user:xxxxx@db:5432/ab?sslmode=disable",
		"postgresql://user@db/ab?password=secret&sslmode=none": "postgresql://user@db/ab?password=xxxxx&sslmode=none",
		"postgres://db/ab": "postgres://db/ab",
		"./data/bridge.db": "./data/bridge.db",
	} {
		if got := maskURL(in); got != want {
			t.Errorf("maskURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestServeLogsNoPassword starts serve on an unreachable PostgreSQL URL
// with a password: neither its log nor its error may show the password.
func TestServeLogsNoPassword(t *testing.T) {
	var stdout, stderr testutil.Buffer
	m := &Main{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
	err := m.Run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--db", "postgres://ab:hunter2@127.0.0.1:1/ab?connect_timeout=1"})
	code := exitCode(&stderr, err)
	if code == 0 {
		t.Fatal("serve started on an unreachable database")
	}
	if strings.Contains(stderr.String(), "hunter2") || strings.Contains(stdout.String(), "hunter2") {
		t.Errorf("the password reached the output:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "xxxxx") {
		t.Errorf("the error does not name the (masked) URL:\n%s", stderr.String())
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
