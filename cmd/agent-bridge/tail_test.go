package main

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// tailLines returns the event lines tail printed (those starting "[").
func tailLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "[") {
			lines = append(lines, l)
		}
	}
	return lines
}

// runTailAsync starts tail in a goroutine writing to out and errb; the
// returned function stops it and returns its error.
func runTailAsync(t *testing.T, env map[string]string, out, errb *testutil.Buffer, args ...string) func() error {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	m := &Main{Stdin: strings.NewReader(""), Stdout: out, Stderr: errb, Getenv: func(k string) string { return env[k] }}
	go func() { done <- m.Run(ctx, append([]string{"tail"}, args...)) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(20 * time.Second):
			t.Fatalf("tail did not stop; stderr %q", errb.String())
			return nil
		}
	}
}

func TestTailResumesAcrossRestart(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	cl := b.client()
	c.ok("thread", "new", "t", "--id", "T")
	post := func(text string) {
		t.Helper()
		b, _ := json.Marshal(text)
		if _, err := cl.Append(t.Context(), "T", agentbridge.EventInput{From: "user", Content: b}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i <= 12; i++ {
		post("m" + strconv.Itoa(i))
	}

	var out, errb testutil.Buffer
	stop := runTailAsync(t, c.env, &out, &errb, "T")
	waitLines := func(n int) {
		t.Helper()
		testutil.WaitFor(t, 20*time.Second, strconv.Itoa(n)+" tail lines", func() bool { return len(tailLines(out.String())) >= n })
	}
	waitLines(10) // the last 10 of 13 events: seq 4..13
	post("m13")
	post("m14")
	waitLines(12)

	b.Stop()
	if _, err := cl.Append(t.Context(), "T", agentbridge.EventInput{From: "user", Content: []byte(`"lost"`)}, ""); err == nil {
		t.Fatal("posted to a stopped bridge")
	}
	b.Start()
	for i := 15; i <= 18; i++ {
		post("m" + strconv.Itoa(i))
	}
	waitLines(16)
	if err := stop(); err != nil {
		t.Fatalf("tail returned %v after its context ended, want nil", err)
	}

	if !strings.Contains(errb.String(), "reconnecting") {
		t.Errorf("tail logged no reconnect; stderr %q", errb.String())
	}
	lines := tailLines(out.String())
	if len(lines) != 16 {
		t.Fatalf("tail printed %d event lines, want 16:\n%s", len(lines), out.String())
	}
	for i, l := range lines {
		seq := i + 4
		want := "m" + strconv.Itoa(seq-1)
		if !strings.HasPrefix(l, "["+strconv.Itoa(seq)+"] ") || !strings.HasSuffix(l, "user → all: "+want) {
			t.Errorf("line %d = %q, want seq %d with %q", i, l, seq, want)
		}
	}
}

func TestTailAllJSON(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "a", "--id", "A")
	c.ok("thread", "new", "b", "--id", "B")

	var out, errb testutil.Buffer
	stop := runTailAsync(t, c.env, &out, &errb, "--all", "--json", "--after", "1", "--presence")
	c.ok("post", "A", "one")
	c.ok("post", "B", "two", "--from", "codex")
	// Presence is not replayed: a stream sees only changes made after it
	// connected. Once tail has printed an event, its stream has connected.
	testutil.WaitFor(t, 20*time.Second, "tail to print the first events", func() bool {
		return strings.Count(out.String(), "\n") >= 2
	})
	if err := b.client().SetPresence(t.Context(), "B", agentbridge.PresenceInput{From: "codex", State: "typing"}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "three events and a presence line", func() bool {
		return strings.Count(out.String(), "\n") >= 4
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var gseqs []int64
	var presence int
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var v struct {
			GSeq     int64                 `json:"gseq"`
			Presence *agentbridge.Presence `json:"presence"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		if v.Presence != nil {
			presence++
			continue
		}
		gseqs = append(gseqs, v.GSeq)
	}
	if len(gseqs) != 3 || gseqs[0] != 2 || gseqs[1] != 3 || gseqs[2] != 4 || presence != 1 {
		t.Fatalf("tail --all --json: gseqs %v, %d presence lines:\n%s", gseqs, presence, out.String())
	}
}

func TestFormatEvent(t *testing.T) {
	t.Parallel()
	e := agentbridge.Event{Seq: 3, GSeq: 9, Thread: "T", TS: "2026-11-21T10:00:00.000000Z", Type: "message", From: "user", To: "codex", Content: json.RawMessage(`"hi\nthere\n"`)}
	if got, want := formatEvent(e, false), "[3] 2026-11-21T10:00:00.000000Z user → codex: hi\n    there"; got != want {
		t.Errorf("formatEvent = %q, want %q", got, want)
	}
	e.Type, e.Content = "control", json.RawMessage(`{"pause":{"on":true}}`)
	if got, want := formatEvent(e, true), `[9] T#3 2026-11-21T10:00:00.000000Z user → codex (control): {"pause":{"on":true}}`; got != want {
		t.Errorf("formatEvent global = %q, want %q", got, want)
	}
}

// TestTailReceipts checks that tail prints receipt changes as lines of
// their own (no ANSI codes when stdout is not a terminal) and that
// --no-receipts leaves them out.
func TestTailReceipts(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	cl := b.client()
	c.ok("thread", "new", "t", "--id", "T")
	ev, err := cl.Append(t.Context(), "T", agentbridge.EventInput{From: "user", To: "codex", Content: []byte(`"hi"`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	var out, errb, quiet, qerr testutil.Buffer
	stop := runTailAsync(t, c.env, &out, &errb, "T")
	stopQuiet := runTailAsync(t, c.env, &quiet, &qerr, "T", "--no-receipts")
	testutil.WaitFor(t, 20*time.Second, "both tails to print the history", func() bool {
		return len(tailLines(out.String())) >= 2 && len(tailLines(quiet.String())) >= 2
	})
	// A receipt is sent only to subscribers connected when it changes; put
	// it again (as a new state) until the tail has seen one.
	states := []string{agentbridge.ReceiptQueued, agentbridge.ReceiptRunning}
	i := 0
	testutil.WaitFor(t, 20*time.Second, "tail to print a receipt", func() bool {
		in := agentbridge.ReceiptInput{Thread: "T", Event: ev.ID, Participant: "codex", From: "bridge-coordinator", State: states[i%2], Invocation: strconv.Itoa(i)}
		i++
		if _, _, err := cl.PutReceipt(t.Context(), in); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(out.String(), "↳ codex: ")
	})
	if _, err := cl.Append(t.Context(), "T", agentbridge.EventInput{From: "user", Content: []byte(`"after"`)}, ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the quiet tail to print the next event", func() bool {
		return strings.Contains(quiet.String(), "after")
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := stopQuiet(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Errorf("tail wrote ANSI codes to a non-terminal:\n%q", out.String())
	}
	if !strings.Contains(out.String(), " for "+ev.ID) {
		t.Errorf("receipt line does not name its event:\n%s", out.String())
	}
	if strings.Contains(quiet.String(), "↳") {
		t.Errorf("tail --no-receipts printed a receipt:\n%s", quiet.String())
	}

	// A new tail prints the backlog's current receipts under their events.
	var late, lerr testutil.Buffer
	stopLate := runTailAsync(t, c.env, &late, &lerr, "T")
	testutil.WaitFor(t, 20*time.Second, "a new tail to print the history with its receipt", func() bool {
		return strings.Contains(late.String(), "after")
	})
	if err := stopLate(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(late.String(), "\n")
	hi := slices.IndexFunc(lines, func(l string) bool { return strings.HasSuffix(l, ": hi") })
	if hi < 0 || hi+1 >= len(lines) || !strings.HasPrefix(lines[hi+1], "  ↳ codex: ") {
		t.Errorf("a new tail did not print the receipt under its event:\n%s", late.String())
	}
}

func TestFormatReceipt(t *testing.T) {
	t.Parallel()
	r := agentbridge.Receipt{Thread: "T", Event: "E", Participant: "gemini", State: "skipped", Reason: "no adapter"}
	if got, want := formatReceipt(r, false), "  ↳ gemini: skipped — no adapter for E"; got != want {
		t.Errorf("formatReceipt = %q, want %q", got, want)
	}
	r = agentbridge.Receipt{Thread: "T", Event: "E", Participant: "codex", State: "succeeded", Invocation: "4", Reply: "R"}
	if got, want := formatReceipt(r, true), "  ↳ codex: succeeded (invocation 4) reply R for T/E"; got != want {
		t.Errorf("formatReceipt = %q, want %q", got, want)
	}
}

// TestTailAfterPrintsReceipts checks that tail --after N prints the past
// events after N with their receipts, as tail --last does, and that an
// --after past the end is named as such.
func TestTailAfterPrintsReceipts(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	cl := b.client()
	c.ok("thread", "new", "t", "--id", "T")
	ev, err := cl.Append(t.Context(), "T", agentbridge.EventInput{From: "user", To: "codex", Content: []byte(`"hi"`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	in := agentbridge.ReceiptInput{Thread: "T", Event: ev.ID, Participant: "codex", From: "bridge-coordinator", State: agentbridge.ReceiptSkipped, Reason: "not invited"}
	if _, _, err := cl.PutReceipt(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	var out, errb testutil.Buffer
	stop := runTailAsync(t, c.env, &out, &errb, "T", "--after", "1")
	testutil.WaitFor(t, 20*time.Second, "tail --after to print the receipt", func() bool { return strings.Contains(out.String(), "↳ codex: skipped — not invited") })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 2 || !strings.HasSuffix(lines[0], ": hi") {
		t.Errorf("tail --after 1 printed:\n%s", out.String())
	}
	_, errOut, code := c.run("tail", "T", "--after", "99")
	if code != 2 || !strings.Contains(errOut, "--after: 99 is past the end of thread T, whose last seq is 2") {
		t.Errorf("tail --after 99: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = c.run("state", "T", "--at", "99")
	if code != 2 || !strings.Contains(errOut, "--at: 99 is past the end of thread T") {
		t.Errorf("state --at 99: exit %d, stderr %q", code, errOut)
	}
}
