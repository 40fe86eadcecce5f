package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// inWorkspace gives machine m the workspace "app" on repo, its agents
// working in it.
func inWorkspace(m *stack.Machine, fake, repo string, agents ...string) {
	entries := map[string]any{}
	for _, a := range agents {
		entries[a] = map[string]any{"command": []string{fake}, "workspace": "app"}
	}
	m.Set("agents", entries)
	m.Set("workspaces", map[string]any{"app": map[string]any{"repo": repo, "base": "main"}})
}

// TestWorkspaceCrash: ten kill -9s of the coordinator (a process of its
// own) at random points of runs that make a worktree, commit a change and
// merge it, each followed by a restart. Afterwards every trigger has one
// reply, every merge control one notice, no commit is carried by two
// replies, no control's merge is in the repository twice, and git lists
// no worktree or agent-bridge branch the thread does not account for.
func TestWorkspaceCrash(t *testing.T) {
	stack.Heavy(t)
	s := stack.New(t, bins, "")
	cl := s.Person
	repo := testutil.GitRepo(t, map[string]string{"README": "app\n"})
	m := s.Machine("laptop", "alice")
	inWorkspace(m, s.Fake, repo, "alice")
	m.Start()
	th := newClaimsThread(t, cl, "alice")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 39))
	var triggers, merges []agentbridge.Event
	for i := range 10 {
		var e agentbridge.Event
		if i%2 == 0 {
			e = th.say("alice", "fake:write=f"+string(rune('a'+i))+".txt=change_"+string(rune('a'+i))+" fake:sleep=300ms")
			triggers = append(triggers, e)
		} else {
			e = th.control(map[string]any{"change": map[string]any{"merge": map[string]any{"participant": "alice"}}})
			merges = append(merges, e)
		}
		time.Sleep(time.Duration(rng.IntN(700)) * time.Millisecond) // a random point of the run or the merge
		m.Kill()
		m.Start()
		// Each step is answered before the next, so that a merge finds
		// the change it merges.
		testutil.WaitFor(t, 60*time.Second, "the answer to step "+e.ID, func() bool {
			return len(th.answersTo(e.ID)) > 0
		})
	}
	for _, e := range triggers {
		if n := len(th.answersTo(e.ID)); n != 1 {
			t.Errorf("trigger %s: %d answers, want 1", e.ID, n)
		}
	}
	commits := map[string]string{}
	evs := th.all()
	for _, e := range evs {
		if ch, ok := agentbridge.ChangeOf(e); ok {
			if prev, dup := commits[ch.Commit]; dup {
				t.Errorf("commit %s is carried by %s and %s", ch.Commit, prev, e.ID)
			}
			commits[ch.Commit] = e.ID
		}
	}
	if len(commits) == 0 {
		t.Error("no reply carried a change")
	}
	log := testutil.Git(t, repo, "log", "--format=%B", "main")
	merged := 0
	for _, e := range merges {
		answers := th.answersTo(e.ID)
		if len(answers) != 1 {
			t.Errorf("merge %s: %d notices, want 1", e.ID, len(answers))
			continue
		}
		r, _ := agentbridge.ChangeResultOf(answers[0])
		landed := strings.Count(log, "Agent-Bridge-Event: "+e.ID)
		if r.State == agentbridge.ChangeMerged {
			merged++
		}
		if want := map[bool]int{true: 1, false: 0}[r.State == agentbridge.ChangeMerged]; landed != want {
			t.Errorf("merge %s (%s: %q) is in main %d times, want %d", e.ID, r.State, answers[0].Text(), landed, want)
		}
	}
	t.Logf("10 kill -9s: %d changes committed, %d of %d merges landed", len(commits), merged, len(merges))
	if merged == 0 {
		t.Error("no merge landed")
	}
	// Git holds no worktree or branch the thread does not account for:
	// at most alice's, while her last change is open.
	open := 0
	for _, b := range agentbridge.ChangesOf(evs) {
		if b.State == "open" {
			open++
		}
	}
	// A merged or discarded branch is removed after its notice is
	// recorded (workspaces.end, then remove), so the last notice may come
	// a moment before its branch goes: waited for, not read once.
	testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("git and the state folder to hold no worktree or agent-bridge branch beyond the thread's %d open change(s)", open), func() bool {
		wts := strings.Count(testutil.Git(t, repo, "worktree", "list"), "\n") // lines after the repository's own
		branches := testutil.Git(t, repo, "branch", "--list", "agent-bridge/*")
		entries, _ := os.ReadDir(filepath.Join(m.Dir, "state", "worktrees", th.id))
		return wts <= open && (branches != "") == (open > 0) && len(entries) <= open
	})
}

// answersTo lists the messages that reply to event id.
func (c *claimsThread) answersTo(id string) []agentbridge.Event {
	var out []agentbridge.Event
	for _, e := range c.all() {
		if e.Type == agentbridge.TypeMessage && e.Meta.ReplyTo == id {
			out = append(out, e)
		}
	}
	return out
}

// all reads every event of the thread.
func (c *claimsThread) all() []agentbridge.Event {
	c.t.Helper()
	evs, err := threadEventsAll(c.ctx, c.cl, c.id)
	if err != nil {
		c.t.Fatal(err)
	}
	return evs
}

// control posts a person's control.
func (c *claimsThread) control(ctl map[string]any) agentbridge.Event {
	c.t.Helper()
	b, _ := json.Marshal(ctl)
	ev, err := c.cl.Append(context.Background(), c.id, agentbridge.EventInput{Type: agentbridge.TypeControl, From: "user", Content: b}, "")
	if err != nil {
		c.t.Fatal(err)
	}
	return ev
}

// TestWorkspaceOnOneMachine: two coordinators, each its own process,
// HOME, state and port, both serving alice; only the server has the
// workspace "app", which the thread picks. Every run goes to the server
// (the laptop does not claim it, and the bridge would refuse it), each
// answered once with its change.
func TestWorkspaceOnOneMachine(t *testing.T) {
	stack.Heavy(t)
	s := stack.New(t, bins, "")
	cl := s.Person
	repo := testutil.GitRepo(t, map[string]string{"README": "app\n"})
	laptop := s.Machine("laptop", "alice")
	server := s.Machine("server", "alice")
	inWorkspace(server, s.Fake, repo)
	server.Set("agents", stack.FakeAgents(s.Fake, "alice"))
	laptop.Start()
	server.Start()
	th := newClaimsThread(t, cl, "alice")
	th.control(map[string]any{"workspace": map[string]any{"name": "app"}})
	var triggers []agentbridge.Event
	for i := range 5 {
		triggers = append(triggers, th.say("alice", "fake:write=n"+string(rune('a'+i))+".txt=x"))
	}
	for _, e := range triggers {
		testutil.WaitFor(t, 60*time.Second, "the reply to "+e.ID, func() bool { return len(th.answersTo(e.ID)) > 0 })
		answers := th.answersTo(e.ID)
		if len(answers) != 1 {
			t.Errorf("%s: %d answers, want 1", e.ID, len(answers))
			continue
		}
		if ch, ok := agentbridge.ChangeOf(answers[0]); !ok || ch.Workspace != "app" {
			t.Errorf("%s: the answer %q carries no change in app", e.ID, answers[0].Text())
		}
		if laptop.Started(e.ID, "alice") || !server.Started(e.ID, "alice") {
			t.Errorf("%s ran on the laptop (%v) or not on the server (%v)", e.ID, laptop.Started(e.ID, "alice"), server.Started(e.ID, "alice"))
		}
	}
}
