package adapters_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// progressSeeds are the lines the parser tests and the fuzzers start from.
var progressSeeds = []string{
	`{"status":"thinking"}`,
	`{"status":"Bash: go test","kind":"tool","detail":{"name":"Bash","input":"go test"}}`,
	`{"status":"","usage":{"input_tokens":10,"output_tokens":2,"cost_usd":0.01},"session":"s-1"}`,
	`{"status":"x","detail":null}`,
	`{"status":"x","detail":[1,2,3]}`,
	`{"status":"x","extra":{"ignored":true}}`,
	`{"status":3}`,
	`{"kind":"tool"}`,
	`{"status":"x","usage":{"input_tokens":"many"}}`,
	`{"status":"x","usage":{"input_tokens":-1}}`,
	`{"status":"x","session":7}`,
	`[{"status":"x"}]`,
	`"status"`,
	`not json`,
	``,
	`{"status":"x"} trailing`,
}

func TestParseProgress(t *testing.T) {
	for _, tc := range []struct {
		line string
		want *adapters.ProgressRecord
	}{
		{`{"status":"thinking"}`, &adapters.ProgressRecord{Status: "thinking"}},
		{` {"status":"Bash: go test","kind":"tool","detail":{"name":"Bash"}} `,
			&adapters.ProgressRecord{Status: "Bash: go test", Kind: "tool", Detail: json.RawMessage(`{"name":"Bash"}`)}},
		{`{"status":"","usage":{"input_tokens":10,"output_tokens":2,"cost_usd":0.01},"session":"s-1"}`,
			&adapters.ProgressRecord{Usage: &adapters.Usage{InputTokens: 10, OutputTokens: 2, CostUSD: 0.01}, Session: "s-1"}},
		{`{"status":"x","detail":null}`, &adapters.ProgressRecord{Status: "x"}},
		{`{"status":"x","extra":1}`, &adapters.ProgressRecord{Status: "x"}},
		{`{"status":3}`, nil},
		{`{"kind":"tool"}`, nil},
		{`{"status":"x","usage":{"input_tokens":"many"}}`, nil},
		{`{"status":"x","usage":{"output_tokens":-1}}`, nil},
		{`{"status":"x","session":7}`, nil},
		{`{"status":"x","kind":["tool"]}`, nil},
		{`[{"status":"x"}]`, nil},
		{`not json`, nil},
		{``, nil},
		{`{"status":"x"} trailing`, nil},
	} {
		got, err := adapters.ParseProgress([]byte(tc.line))
		if tc.want == nil {
			if err == nil {
				t.Errorf("ParseProgress(%q) = %+v, want an error", tc.line, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseProgress(%q): %v", tc.line, err)
			continue
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(tc.want)
		if !bytes.Equal(gj, wj) {
			t.Errorf("ParseProgress(%q) = %s, want %s", tc.line, gj, wj)
		}
	}
}

func FuzzParseProgress(f *testing.F) {
	for _, s := range progressSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := adapters.ParseProgress(line)
		if err != nil {
			return
		}
		// A good record survives a round trip through its own JSON.
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatalf("marshal %+v: %v", rec, err)
		}
		again, err := adapters.ParseProgress(b)
		if err != nil {
			t.Fatalf("re-parse %s: %v", b, err)
		}
		if again.Status != rec.Status || again.Kind != rec.Kind || again.Session != rec.Session {
			t.Fatalf("round trip changed %+v into %+v", rec, again)
		}
	})
}

func FuzzReadProgress(f *testing.F) {
	f.Add([]byte(strings.Join(progressSeeds, "\n")))
	f.Add([]byte("{\"status\":\"a\"}\r\n\n{\"status\":\"b\"}"))
	f.Add(append(bytes.Repeat([]byte("x"), adapters.MaxProgressLine+5), "\n{\"status\":\"after\"}\n"...))
	f.Fuzz(func(t *testing.T, in []byte) {
		var good int64
		lines, bad := adapters.ReadProgress(bytes.NewReader(in), func(adapters.ProgressRecord) { good++ })
		if good+bad != lines {
			t.Fatalf("%d good + %d bad != %d lines", good, bad, lines)
		}
		if want := int64(bytes.Count(in, []byte("\n"))); lines != want && lines != want+1 {
			t.Fatalf("%d lines for %d newlines", lines, want)
		}
	})
}

func TestReadProgressLongLines(t *testing.T) {
	long := strings.Repeat("x", adapters.MaxProgressLine+1)
	exact := `{"status":"` + strings.Repeat("e", adapters.MaxProgressLine-13) + `"}`
	if len(exact) != adapters.MaxProgressLine {
		t.Fatalf("exact line is %d bytes", len(exact))
	}
	in := long + "\n" + exact + "\n" + `{"status":"after"}` + "\n" + long
	var got []string
	lines, bad := adapters.ReadProgress(strings.NewReader(in), func(r adapters.ProgressRecord) { got = append(got, r.Status[:1]) })
	if lines != 4 || bad != 2 || strings.Join(got, ",") != "e,a" {
		t.Fatalf("lines %d bad %d records %v; want 4 lines, 2 bad, records e,a", lines, bad, got)
	}
}

// endless yields n bytes of 'x' with no newline, then EOF.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	k := min(int64(len(p)), e.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	e.n -= k
	return int(k), nil
}

func TestReadProgressHugeLineBoundedMemory(t *testing.T) {
	// 256 MiB in one line: the reader must skip it, not hold it.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	lines, bad := adapters.ReadProgress(&endless{n: 256 << 20}, nil)
	runtime.ReadMemStats(&after)
	if lines != 1 || bad != 1 {
		t.Fatalf("lines %d bad %d, want 1 and 1", lines, bad)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("allocated %d bytes for one skipped line", alloc)
	}
}

func TestRunProgress(t *testing.T) {
	var mu sync.Mutex
	var recs []adapters.ProgressRecord
	res, _ := runFake(t, context.Background(), "fake:progress=3", adapters.Spec{Progress: func(r adapters.ProgressRecord) {
		mu.Lock()
		defer mu.Unlock()
		recs = append(recs, r)
	}})
	if !res.OK() {
		t.Fatalf("not OK: %s", adapters.ErrorMessage(res, 0))
	}
	if res.ProgressLines != 5 || res.ProgressBad != 2 {
		t.Errorf("lines %d bad %d, want 5 and 2", res.ProgressLines, res.ProgressBad)
	}
	if len(recs) != 3 {
		t.Fatalf("got %d records, want 3: %+v", len(recs), recs)
	}
	last := recs[2]
	if last.Status != "step 3" || last.Kind != "tool" || last.Session != "fake-session" ||
		last.Usage == nil || *last.Usage != (adapters.Usage{InputTokens: 3, OutputTokens: 6, CostUSD: 0.003}) ||
		string(last.Detail) != `{"i":3}` {
		t.Errorf("last record %+v", last)
	}
}

func TestRunWithoutProgressReader(t *testing.T) {
	// An adapter that writes progress while nobody listens still runs, and
	// so does one that never writes there.
	res, _ := runFake(t, context.Background(), "fake:progress=2", adapters.Spec{})
	if !res.OK() || res.ProgressLines != 4 {
		t.Fatalf("result %+v", res)
	}
	res, _ = runFake(t, context.Background(), "hello", adapters.Spec{})
	if !res.OK() || res.ProgressLines != 0 {
		t.Fatalf("result %+v", res)
	}
}

func TestRunProgressFloodDoesNotBlock(t *testing.T) {
	// The adapter floods fd 3 while it sleeps, then replies: the reply
	// arrives and the lines were all drained.
	var n int64
	res, _ := runFake(t, context.Background(), "fake:flood=100000 fake:sleep=300ms fake:say=done", adapters.Spec{
		Progress: func(adapters.ProgressRecord) { n++ },
	})
	if !res.OK() || string(res.Stdout) != "done" {
		t.Fatalf("result %+v: %s", res, adapters.ErrorMessage(res, 0))
	}
	// The last batch may be cut short when the adapter exits mid-write.
	if n == 0 || res.ProgressBad > 1 || n+res.ProgressBad != res.ProgressLines {
		t.Errorf("%d records of %d lines (%d bad)", n, res.ProgressLines, res.ProgressBad)
	}
}

func TestRunCancelledStopsGroup(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	dir := t.TempDir()
	p, b := testPayload(t, "fake:ignoreterm fake:child")
	done := make(chan adapters.Result, 1)
	go func() {
		done <- adapters.Run(ctx, adapters.Spec{
			Command: []string{fakePath},
			Env:     append([]string{"FAKE_ADAPTER_DIR=" + dir}, adapters.BridgeEnv(p)...),
			// The cancel grace (2 s) applies, not this one.
			KillGrace: time.Hour,
		}, b, nil)
	}()
	childFile := filepath.Join(dir, p.EventID+".child")
	testutil.WaitFor(t, 10*time.Second, "the fake to start its grandchild", func() bool {
		_, err := os.Stat(childFile)
		return err == nil
	})
	pid := readPID(t, childFile)
	cancel(adapters.ErrCancelled)
	var res adapters.Result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the cancel")
	}
	if !res.Cancelled || res.Interrupted || res.OK() {
		t.Fatalf("result = %+v, want cancelled", res)
	}
	if !res.Signaled || res.Signal != syscall.SIGKILL {
		t.Errorf("signaled %v by %v, want SIGKILL after SIGTERM was ignored", res.Signaled, res.Signal)
	}
	if msg := adapters.ErrorMessage(res, 0); !strings.Contains(msg, "cancelled") {
		t.Errorf("error message %q", msg)
	}
	testutil.WaitFor(t, 10*time.Second, "the grandchild to be killed", func() bool { return !alive(pid) })
	// A context already cancelled this way starts nothing.
	res = adapters.Run(ctx, adapters.Spec{Command: []string{fakePath}}, b, nil)
	if !res.Cancelled || res.PID != 0 || !errors.Is(context.Cause(ctx), adapters.ErrCancelled) {
		t.Errorf("after cancel: result = %+v", res)
	}
}

func TestRunEscapedProcessHoldingProgressFD(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	// The adapter leaves a process in a new session (beyond the group
	// kill) that holds only fd 3: Run returns after the bounded drain,
	// with the records written before.
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	script := `echo '{"status":"before"}' >&3
setsid /bin/sh -c 'echo $$ > "$0"; exec sleep 1000' "$1" </dev/null >/dev/null 2>&1 &
while [ ! -s "$1" ]; do :; done
echo done`
	var got []string
	res := adapters.Run(context.Background(), adapters.Spec{
		Command:  []string{"/bin/sh", "-c", script, "sh", pidFile},
		Progress: func(r adapters.ProgressRecord) { got = append(got, r.Status) },
	}, []byte("{}"), nil)
	b, _ := os.ReadFile(pidFile)
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
		defer func() { _ = syscall.Kill(pid, syscall.SIGKILL) }()
		if !alive(pid) {
			t.Errorf("the escaped process %d is gone; this test no longer exercises the bounded drain", pid)
		}
	}
	if !res.OK() || string(res.Stdout) != "done\n" || len(got) != 1 || got[0] != "before" {
		t.Fatalf("result %+v, records %v", res, got)
	}
}
