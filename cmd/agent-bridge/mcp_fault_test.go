package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// rpcLine is one JSON-RPC message the server wrote.
type rpcLine struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestMCPBadLineKeepsServing writes raw lines to the real binary's stdin:
// a line that is not JSON gets a -32700 parse error, a JSON line that is
// no JSON-RPC message gets -32600, and the session goes on: a call in
// flight before the bad line is answered after it, and a new call is
// answered too (contract 6.2). The SDK alone ended the session at the bad
// line and lost the answer in flight.
func TestMCPBadLineKeepsServing(t *testing.T) {
	stack.Heavy(t)
	bin := buildServeBinary(t)
	b := startTokenBridge(t, "tok")
	bc := b.client()
	if _, err := bc.CreateThread(t.Context(), agentbridge.CreateThreadRequest{ID: "t1", From: "user"}); err != nil {
		t.Fatal(err)
	}
	q, err := bc.Append(t.Context(), "t1", agentbridge.EventInput{From: "claude", To: "codex", Content: json.RawMessage(`"ULID or UUID?"`)}, "")
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "mcp", "--as", "claude", "--url", b.URL())
	cmd.Env = append(os.Environ(), "BRIDGE_TOKEN="+b.Token())
	stderr := &testutil.Buffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := make(chan rpcLine, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m rpcLine
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("the server wrote a line that is not JSON: %q", sc.Text())
				continue
			}
			lines <- m
		}
	}()
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(stdin, s+"\n"); err != nil {
			t.Fatalf("write %q: %v (stderr %s)", s, err, stderr.String())
		}
	}
	next := func(what string) rpcLine {
		t.Helper()
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatalf("%s: the server closed stdout (exit %v); stderr:\n%s", what, cmd.Wait(), stderr.String())
			}
			return m
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: no answer within 20 s; stderr:\n%s", what, stderr.String())
		}
		return rpcLine{}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	if m := next("initialize"); string(m.ID) != "1" || m.Error != nil {
		t.Fatalf("initialize answered %+v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	// A call in flight: it waits for a reply that comes after the bad line.
	send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wait_for_reply","arguments":{"thread":"t1","event_id":%q,"timeout_s":60}}}`, q.ID))
	send(`this is not JSON {`)
	if m := next("the bad line"); m.Error == nil || m.Error.Code != -32700 || string(m.ID) != "null" {
		t.Fatalf("the bad line got %+v, want a -32700 parse error with id null", m)
	}
	send(`{"id":7,"hello":"world"}`)
	if m := next("the JSON line that is no message"); m.Error == nil || m.Error.Code != -32600 || string(m.ID) != "7" {
		t.Fatalf("the JSON non-message got %+v, want -32600 with id 7", m)
	}
	for _, batch := range []string{`[]`, `[{"jsonrpc":"2.0","id":8,"method":"ping"},{"nope":1}]`} {
		send(batch)
		if m := next("the bad batch " + batch); m.Error == nil || m.Error.Code != -32600 {
			t.Fatalf("the bad batch %s got %+v, want -32600", batch, m)
		}
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_threads","arguments":{}}}`)
	if m := next("list_threads after the bad line"); string(m.ID) != "3" || m.Error != nil {
		t.Fatalf("list_threads after the bad line answered %+v", m)
	}
	if _, err := bc.Append(t.Context(), "t1", agentbridge.EventInput{From: "codex", Content: json.RawMessage(`"ULID."`), Meta: agentbridge.Meta{ReplyTo: q.ID}}, ""); err != nil {
		t.Fatal(err)
	}
	m := next("the call in flight")
	var res struct {
		IsError           bool `json:"isError"`
		StructuredContent struct {
			Status string `json:"status"`
		} `json:"structuredContent"`
	}
	if string(m.ID) != "2" || m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.IsError || res.StructuredContent.Status != "replied" {
		t.Fatalf("the call in flight answered %+v (%s), want status replied", m, m.Result)
	}
	_ = stdin.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after stdin closed: %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit within 20 s of stdin closing")
	}
}
