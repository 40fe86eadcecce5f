package realclitest

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// scriptAdapter writes a script adapter that replaces file in its working
// folder with line and answers that it did.
func scriptAdapter(t testing.TB, dir, name, file, line string) string {
	t.Helper()
	path := filepath.Join(dir, name+".sh")
	body := "#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' '" + line + "' > " + file + "\necho '" + name + " rewrote " + file + "'\n"
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestPartyOnOneRepository: three agents in party mode on one 3-file
// repository, each in its own worktree — the real claude CLI, whose
// model (the fake, fakemodel.WriteFile) has claude's own Read and Write
// tools change a.txt, and two script adapters that change a.txt too, each
// differently. Three branches, three replies with meta.change whose
// commits hold only their own agent's edit; agent-bridge merge lands
// claude's in the repository and leaves the other two branches; merging a
// second, which conflicts, changes nothing, exits 1 and posts one notice
// naming a.txt.
func TestPartyOnOneRepository(t *testing.T) {
	t.Parallel()
	need(t)
	repo := testutil.GitRepo(t, map[string]string{"a.txt": "first\n", "b.txt": "second\n", "c.txt": "third\n"})
	claude := newAgent(t, "claude", "claude")
	claude.fake.SetResponder(fakemodel.WriteFile)
	// acceptEdits: claude -p may write files without asking.
	claude.extras["AGENT_BRIDGE_CLAUDE_ARGS"] = "--permission-mode acceptEdits"
	scripts := t.TempDir()
	s := newStackEdit(t, false, func(cfg map[string]any) {
		cfg["workspaces"] = map[string]any{"app": map[string]any{"repo": repo, "base": "main"}}
		agents := cfg["agents"].(map[string]any)
		agents["claude"].(map[string]any)["workspace"] = "app"
		for name, line := range map[string]string{"alice": "alice first line", "bob": "bob first line"} {
			agents[name] = map[string]any{"command": []string{scriptAdapter(t, scripts, name, "a.txt", line)}, "workspace": "app"}
		}
	}, claude)
	th := s.thread("party on app")
	for _, id := range []string{"alice", "bob"} {
		ctl, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": id, "profile": map[string]any{"client": "script", "model": "sh"}}})
		if _, err := s.cl.Append(t.Context(), th, agentbridge.EventInput{Type: "control", From: "user", Content: ctl}, ""); err != nil {
			t.Fatal(err)
		}
	}
	party, _ := json.Marshal(map[string]any{"party": map[string]any{"on": true, "agents": []string{"claude", "alice", "bob"}, "max_agents": 3, "cross_talk": false}})
	if _, err := s.cl.Append(t.Context(), th, agentbridge.EventInput{Type: "control", From: "user", Content: party}, ""); err != nil {
		t.Fatal(err)
	}
	content, _ := json.Marshal("Everyone, change the first line of a.txt your way. " + fakemodel.WriteMarker + "a.txt=claude_first_line")
	trig, err := s.cl.Append(t.Context(), th, agentbridge.EventInput{Type: "message", From: "user", To: agentbridge.ToAll, Content: content}, "")
	if err != nil {
		t.Fatal(err)
	}
	changes := map[string]agentbridge.Change{}
	deadline := time.Now().Add(3 * replyTimeout)
	testutil.WaitFor(t, 3*replyTimeout, "three replies with a change", func() bool {
		for _, e := range s.answers(th, trig.ID) {
			if time.Until(deadline) < 2*time.Second { // what came, when it fails
				t.Logf("answer from %s: %q %s", e.From, text(e), e.Meta.Extra)
			}
			if ch, ok := agentbridge.ChangeOf(e); ok {
				changes[e.From] = ch
			}
		}
		return len(changes) == 3
	})
	wants := map[string]string{"claude": "claude first line", "alice": "alice first line", "bob": "bob first line"}
	branches := map[string]bool{}
	for who, ch := range changes {
		branches[ch.Branch] = true
		if ch.Branch != "agent-bridge/party-on-app/"+who || len(ch.Files) != 1 || ch.Files[0].Path != "a.txt" || ch.Files[0].Status != agentbridge.ChangeModified {
			t.Errorf("%s's change = %+v", who, ch)
		}
		// The diff as the thread holds it (its attachment), through the CLI.
		cmd := exec.Command(bin, "diff", th, who, "--url", s.bridgeURL)
		cmd.Env = append(os.Environ(), "BRIDGE_TOKEN="+s.token)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("agent-bridge diff %s: %v", who, err)
		}
		diff := string(out)
		if !strings.Contains(diff, "+"+wants[who]) {
			t.Errorf("%s's commit lacks its own edit:\n%s", who, diff)
		}
		for other, line := range wants {
			if other != who && strings.Contains(diff, line) {
				t.Errorf("%s's commit holds %s's edit:\n%s", who, other, diff)
			}
		}
	}
	if len(branches) != 3 {
		t.Fatalf("branches = %v, want three", branches)
	}

	merge := exec.Command(bin, "merge", th, "claude", "--url", s.bridgeURL)
	merge.Env = append(os.Environ(), "BRIDGE_TOKEN="+s.token)
	if out, err := merge.CombinedOutput(); err != nil || !strings.Contains(string(out), "Merged claude's change into main") {
		t.Fatalf("agent-bridge merge claude: %v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "a.txt")); string(b) != "claude first line\n" {
		t.Errorf("a.txt after the merge = %q", b)
	}
	for _, who := range []string{"alice", "bob"} {
		if testutil.Git(t, repo, "branch", "--list", changes[who].Branch) == "" {
			t.Errorf("%s's branch went with claude's merge", who)
		}
	}
	head := testutil.Git(t, repo, "rev-parse", "HEAD")
	merge = exec.Command(bin, "merge", th, "alice", "--url", s.bridgeURL)
	merge.Env = append(os.Environ(), "BRIDGE_TOKEN="+s.token)
	out, err := merge.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "conflicts in a.txt") {
		t.Errorf("agent-bridge merge alice (conflicting): %v\n%s", err, out)
	}
	if testutil.Git(t, repo, "rev-parse", "HEAD") != head || testutil.Git(t, repo, "status", "--porcelain") != "" {
		t.Error("a conflicting merge changed the repository")
	}
	notices := 0
	evs, err := s.cl.ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: th, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if r, ok := agentbridge.ChangeResultOf(e); ok && r.Participant == "alice" {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("%d notices for alice's merge, want 1", notices)
	}
}
