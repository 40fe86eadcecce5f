package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

func TestMCPUsageErrors(t *testing.T) {
	t.Parallel()
	c := cli{t: t, env: map[string]string{}}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp"}, "--as: required"},
		{[]string{"mcp", "--as", "no spaces"}, `--as: "no spaces" is not a valid participant id`},
		{[]string{"mcp", "--as", "claude", "--url", "ftp://x"}, "--url"},
		{[]string{"mcp", "--as", "claude", "extra"}, `unexpected argument "extra"`},
		{[]string{"mcp", "--as", "claude", "--token", "a", "--token-file", "f"}, "give one, not both"},
		{[]string{"mcp", "--as", "claude", "--log-level", "loud"}, "--log-level"},
	} {
		out, errOut, code := c.run(tc.args...)
		if code != 2 || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 naming %q and nothing on stdout", tc.args, code, out, errOut, tc.want)
		}
	}
}

// mcpProc starts the real binary as `agent-bridge mcp` against b and
// connects the SDK's client to it over the process's stdin and stdout.
func mcpProc(t *testing.T, bin string, b *testBridge, as string) (*mcp.ClientSession, *exec.Cmd, *testutil.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, "mcp", "--as", as, "--url", b.URL(), "--log-level", "info")
	cmd.Env = append(os.Environ(), "BRIDGE_TOKEN="+b.Token())
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil).
		Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to agent-bridge mcp: %v (stderr %s)", err, stderr.String())
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return cs, cmd, stderr
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		t.Fatalf("%s: tool error: %s", name, text.String())
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %s: %v", name, b, err)
		}
	}
	return text.String()
}

// TestMCPBinary speaks MCP over stdio to the real binary: a conversation
// through every kind of call, a clean exit 0 when the client closes stdin,
// and a clean exit 0 on SIGTERM in the middle of a wait.
func TestMCPBinary(t *testing.T) {
	stack.Heavy(t)
	bin := buildServeBinary(t)
	b := startTokenBridge(t, "tok")
	cs, cmd, stderr := mcpProc(t, bin, b, "claude")

	if got := cs.InitializeResult().ServerInfo.Name; got != "agent-bridge" {
		t.Errorf("server name = %q", got)
	}
	callTool(t, cs, "create_thread", map[string]any{"name": "design", "id": "design"}, nil)
	var p struct {
		ID string `json:"id"`
	}
	callTool(t, cs, "post", map[string]any{"thread": "design", "content": "ULID or UUID?", "to": "codex"}, &p)
	reply, err := b.client().Append(t.Context(), "design", agentbridge.EventInput{From: "codex", Content: json.RawMessage(`"ULID."`), Meta: agentbridge.Meta{ReplyTo: p.ID}}, "")
	if err != nil {
		t.Fatal(err)
	}
	var w struct {
		Status string `json:"status"`
		Reply  struct {
			ID string `json:"id"`
		} `json:"reply"`
	}
	callTool(t, cs, "wait_for_reply", map[string]any{"thread": "design", "event_id": p.ID, "timeout_s": 30}, &w)
	if w.Status != "replied" || w.Reply.ID != reply.ID {
		t.Fatalf("wait_for_reply = %+v, want reply %s", w, reply.ID)
	}
	res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "bridge://threads/design"})
	if err != nil || len(res.Contents) != 1 || !strings.Contains(res.Contents[0].Text, "codex -> all reply_to="+p.ID) {
		t.Fatalf("read resource = %+v, %v", res, err)
	}

	// Closing the client closes the server's stdin: exit 0.
	if err := cs.Close(); err != nil {
		t.Fatalf("close session (the server's exit): %v; stderr:\n%s", err, stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after stdin closed", code)
	}
	if !strings.Contains(stderr.String(), "agent-bridge mcp serving on stdio") {
		t.Errorf("stderr lacks the start line:\n%s", stderr.String())
	}

	// SIGTERM during a wait: the wait ends and the process exits 0.
	cs, cmd, stderr = mcpProc(t, bin, b, "claude")
	waitErr := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "wait_for_reply", Arguments: map[string]any{"thread": "design", "event_id": reply.ID, "timeout_s": 600}})
		waitErr <- err
	}()
	testutil.WaitFor(t, 10*time.Second, "the wait's stream to open", func() bool { return threadStreams(t, b) == 1 })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waitErr:
		if err == nil {
			t.Fatal("the wait succeeded though the server was stopped")
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the wait did not end after SIGTERM; stderr:\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if err := cs.Close(); err != nil && !errors.As(err, &ee) {
		t.Fatalf("close: %v", err)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("after SIGTERM: state %v; stderr:\n%s", cmd.ProcessState, stderr.String())
	}
	testutil.WaitFor(t, 10*time.Second, "the stream to close", func() bool { return threadStreams(t, b) == 0 })
}

// threadStreams reads the bridge's count of open thread streams from its
// metrics.
func threadStreams(t *testing.T, b *testBridge) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, b.URL()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+b.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `agent_bridge_stream_subscribers{kind="thread"} `); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return int(n)
		}
	}
	return 0
}
