package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// sceneEvents returns the thread's speeches, thinking, journal and
// scene.closed events.
func sceneEvents(t *testing.T, cl *client.Client, thread string) (speeches, thinking, journals, closed []agentbridge.Event) {
	t.Helper()
	evs, err := cl.ThreadEvents(context.Background(), agentbridge.ThreadEventsQuery{Thread: thread, After: -1})
	if err != nil {
		return
	}
	for _, e := range evs {
		switch e.Type {
		case agentbridge.TypeMessage:
			if m, ok := agentbridge.SceneMetaOf(e); ok && m.Turn > 0 {
				speeches = append(speeches, e)
			}
		case agentbridge.TypeThinking:
			thinking = append(thinking, e)
		case agentbridge.TypeJournal:
			journals = append(journals, e)
		case agentbridge.TypeSceneClosed:
			closed = append(closed, e)
		}
	}
	return
}

// TestSceneKill9 kills the coordinator with SIGKILL in the middle of a
// scene, restarts it, and requires every turn exactly once: turns 1…n
// each spoken once, one thinking per speech, one scene.closed, one
// journal per actor.
func TestSceneKill9(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	e := newCoordEnv(t, fake)
	cfg := map[string]any{
		"bridge_url": e.bridge.URL(), "status_addr": strings.TrimPrefix(e.statusURL, "http://"),
		"startup_mode": "resume", "shutdown_grace_s": 5, "max_invocations_per_minute": 1000,
		"agents": map[string]any{"alice": map[string]any{"command": []string{fake}}, "bob": map[string]any{"command": []string{fake}}},
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(e.cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	p := e.startCoordProc(bin)
	ctx := context.Background()
	th, err := e.cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "kill"})
	if err != nil {
		t.Fatal(err)
	}
	post := func(v any) {
		t.Helper()
		c, _ := json.Marshal(v)
		if _, err := e.cl.Append(ctx, th.ID, agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user", Content: c}, ""); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"alice", "bob"} {
		post(map[string]any{"invite": map[string]any{"participant_id": id, "profile": map[string]any{"client": "fake", "model": "m"}}})
	}
	const hardCap = 4
	post(map[string]any{"scene": map[string]any{"on": true, "actors": []string{"alice", "bob"}, "soft_cap": hardCap, "hard_cap": hardCap,
		"briefs": map[string]string{"alice": "fake:sleep=300ms", "bob": "fake:sleep=300ms"}}})
	testutil.WaitFor(t, 60*time.Second, "three speeches", func() bool {
		sp, _, _, _ := sceneEvents(t, e.cl, th.ID)
		return len(sp) >= 3
	})
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.Wait(t)
	p2 := e.startCoordProc(bin)
	var sp, thinking, journals, closed []agentbridge.Event
	testutil.WaitFor(t, 60*time.Second, "the scene to close and both journals", func() bool {
		sp, thinking, journals, closed = sceneEvents(t, e.cl, th.ID)
		return len(closed) >= 1 && len(journals) >= 2
	})
	if len(sp) != 2*hardCap-1 {
		t.Errorf("%d speeches, want %d (alice reaches the hard cap at turn %d)", len(sp), 2*hardCap-1, 2*hardCap-1)
	}
	for i, s := range sp {
		if m, _ := agentbridge.SceneMetaOf(s); m.Turn != i+1 {
			t.Errorf("speech %d has turn %d: a turn was lost or doubled", i, m.Turn)
		}
	}
	if len(thinking) != len(sp) || len(closed) != 1 || len(journals) != 2 {
		t.Errorf("thinking %d, scene.closed %d, journals %d; want %d, 1, 2", len(thinking), len(closed), len(journals), len(sp))
	}
	if closed[0].Text() != agentbridge.CloseHardCap {
		t.Errorf("close reason %q", closed[0].Text())
	}
	p2.Terminate(t)
}

// TestSceneDemo runs docs/scenes.md's worked example against the real
// binary: `agent-bridge up` with the shipped scene-demo agent, then the
// doc's commands. The scene must close on its own.
func TestSceneDemo(t *testing.T) {
	stack.Heavy(t)
	bin, _ := buildCoordBinaries(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "coordinator.config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var shipped map[string]any
	if err := json.Unmarshal(raw, &shipped); err != nil {
		t.Fatal(err)
	}
	demo := shipped["agents"].(map[string]any)["scene-demo"].(map[string]any)
	demo["command"] = []string{filepath.Join(root, "adapters", "scene-demo.sh")}
	dir := t.TempDir()
	statusAddr := testutil.FreeAddr(t)
	cfg := map[string]any{"status_addr": statusAddr, "agents": map[string]any{"scene-demo": demo},
		"scene_primer_path": filepath.Join(root, "docs", "scene-actor-primer.md")}
	b, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "coordinator.config.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testutil.FreeAddr(t)
	up := exec.Command(bin, "up", "--addr", addr, "--db", filepath.Join(dir, "bridge.db"), "--config", cfgPath, "--state", filepath.Join(dir, "coordinator.db"))
	var upErr testutil.Buffer
	up.Stderr = &upErr
	// The doc puts agent-bridge on PATH; scene-demo.sh finds it there or
	// through AGENT_BRIDGE_BIN, which the coordinator sets.
	up.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "BRIDGE_TOKEN=")
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = up.Process.Signal(syscall.SIGTERM)
		_ = up.Wait()
		if t.Failed() {
			t.Logf("up stderr:\n%s", upErr.String())
		}
	})
	url := "http://" + addr
	run := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		// BRIDGE_DB names up's database, so the CLI finds the person
		// token up made next to it.
		env := map[string]string{agentbridge.EnvDB: filepath.Join(dir, "bridge.db")}
		m := &Main{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }}
		if err := m.Run(context.Background(), append(args, "--url", url)); err != nil {
			t.Fatalf("agent-bridge %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	// As a person waits for up's "Open the UI" line: by then the
	// coordinator follows the log.
	testutil.WaitFor(t, 30*time.Second, "up's coordinator to follow the log", func() bool {
		resp, err := http.Get("http://" + statusAddr + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Following bool }
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Following
	})
	th := strings.TrimSpace(run("thread", "new", "kitchen"))
	run("invite", th, "maria", "--client", "scene-demo", "--model", "demo", "--character", "Maria Stern, 58, a retired ferry captain who says less than she means.")
	run("invite", th, "sam", "--client", "scene-demo", "--model", "demo", "--character", "Sam Reed, 31, her nephew, back after six years away.")
	run("scene", th, "on", "--actors", "maria,sam", "--setting", "Maria's kitchen on a grey morning.",
		"--brief", "maria=Sam wrote that he is coming. You have not seen him in six years.",
		"--brief", "sam=You have come to apologise to your aunt.")
	token, err := readTokenFile(filepath.Join(dir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	cl := client.New(url, client.WithToken(token))
	testutil.WaitFor(t, 60*time.Second, "the demo scene to close on its own and both journals", func() bool {
		_, _, journals, closed := sceneEvents(t, cl, th)
		return len(closed) == 1 && len(journals) == 2
	})
	if st := run("state", th); !strings.Contains(st, "close reason: natural") || !strings.Contains(st, "maria 3, sam 2") {
		t.Errorf("state:\n%s", st)
	}
	md := run("transcript", th)
	for _, want := range []string{"**MARIA:** *[opens the door]* Oh. You came.", "**SAM:** Only that I'm sorry.", "*[end of scene]*", "- Close reason: natural"} {
		if !strings.Contains(md, want) {
			t.Errorf("transcript lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "weighs what") {
		t.Errorf("the transcript holds private thinking:\n%s", md)
	}
	var log []agentbridge.TranscriptEntry
	if err := json.Unmarshal([]byte(run("transcript", th, "--format", "json")), &log); err != nil || len(log) == 0 {
		t.Fatalf("json transcript: %v", err)
	}
	if last := log[len(log)-1]; last.Type != agentbridge.EntryJournal && last.Type != agentbridge.EntryClose {
		t.Errorf("the event log ends with %+v", last)
	}
	var jout, jerr bytes.Buffer
	env := map[string]string{agentbridge.EnvDB: filepath.Join(dir, "bridge.db")}
	m := &Main{Stdin: strings.NewReader(""), Stdout: &jout, Stderr: &jerr, Getenv: func(k string) string { return env[k] }}
	if err := m.Run(context.Background(), []string{"journal", "maria", "--coordinator-url", "http://" + statusAddr}); err != nil {
		t.Fatalf("journal: %v %s", err, jerr.String())
	}
	if !strings.Contains(jout.String(), "Dear journal: today sam and I") || !strings.Contains(jout.String(), fmt.Sprintf("## %d-", time.Now().UTC().Year())) {
		t.Errorf("journal maria:\n%s", jout.String())
	}
}
