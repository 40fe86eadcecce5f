package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/workspace"
)

// Workspaces (contract 8.1, docs/workspaces.md). A run whose agent works
// in a workspace runs in the pair's worktree (made at its first run,
// under the coordinator's worktrees folder, kept across runs); after a run
// that answered, what the worktree holds is committed on the pair's branch
// and the reply carries meta.change. A person's change control merges the
// branch into the repository, or discards it. Every git step is a ledger
// step first: the worktree's row (making, ready, removing), the worktree's
// HEAD when a run began (a run cut short starts again from there), and a
// merge or discard by its control event; recovery finishes each.

// workspaces is the coordinator's side of workspaces; it is safe for
// concurrent use.
type workspaces struct {
	deps
	git workspace.Git
	// dir is the folder the worktrees are made in.
	dir string
	// upload stores a change's diff as an attachment of the thread and
	// returns its id.
	upload func(ctx context.Context, thread, name string, body []byte) (string, error)
	// background runs a merge or discard on the work context, which the
	// shutdown waits for; postNotice posts a change's notice
	// (scheduler.background, scheduler.postNotice).
	background func(f func(work context.Context))
	postNotice func(n ledger.Notice)

	mu sync.Mutex
	// pairs serialises what touches one pair's worktree: a run from its
	// start to its commit, a merge, a removal.
	pairs map[pairKey]*sync.Mutex
	// repos serialises what touches a repository's own refs and work tree
	// (worktree add and remove, merge).
	repos map[string]*sync.Mutex
	// started is when this coordinator started: a git lock older than it
	// in a repository it merges into is its own crash's.
	started time.Time
	// trk notes what changes in the worktrees, so that a run's commit
	// stages only that (workspace.Tracker); made at the first run in a
	// workspace, nil until then or where it cannot be had. trkTried
	// says it was tried.
	trk      *workspace.Tracker
	trkTried bool
}

// tracker is the worktrees' Tracker, started at its first use; nil when
// it cannot be (each commit then stages the whole worktree).
func (w *workspaces) tracker() *workspace.Tracker {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.trkTried {
		w.trkTried = true
		trk, err := workspace.NewTracker(w.dir)
		if err != nil {
			w.log.Warn("cannot watch the worktrees; each run's commit stages its whole worktree", "err", err)
		}
		w.trk = trk
	}
	return w.trk
}

// forget stops tracking the worktree at path, which is removed.
func (w *workspaces) forget(path string) {
	w.mu.Lock()
	trk := w.trk
	w.mu.Unlock()
	trk.Forget(path)
}

// close stops the tracker, once nothing runs any more.
func (w *workspaces) close() {
	w.mu.Lock()
	trk := w.trk
	w.trk, w.trkTried = nil, true
	w.mu.Unlock()
	if err := trk.Close(); err != nil {
		w.log.Warn("stop watching the worktrees", "err", err)
	}
}

func newWorkspaces(d deps, dir string, sched *scheduler) *workspaces {
	return &workspaces{deps: d, dir: dir, pairs: map[pairKey]*sync.Mutex{}, repos: map[string]*sync.Mutex{},
		upload: d.uploadDiff, background: sched.background, postNotice: sched.postNotice, started: time.Now()}
}

// lockOf returns the mutex of key in m, making it.
func lockOf[K comparable](mu *sync.Mutex, m map[K]*sync.Mutex, key K) *sync.Mutex {
	mu.Lock()
	defer mu.Unlock()
	l, ok := m[key]
	if !ok {
		l = &sync.Mutex{}
		m[key] = l
	}
	return l
}

func (w *workspaces) pairLock(thread, participant string) *sync.Mutex {
	return lockOf(&w.mu, w.pairs, pairKey{thread, participant})
}

func (w *workspaces) repoLock(repo string) *sync.Mutex { return lockOf(&w.mu, w.repos, repo) }

// runTree is the worktree one run works in, from its start to its
// commit; it holds the pair's lock until done is called.
type runTree struct {
	name   string
	tree   workspace.Tree
	parent string
	unlock func()
}

// done releases the pair for a merge or the next run.
func (r *runTree) done() {
	if r != nil && r.unlock != nil {
		r.unlock()
		r.unlock = nil
	}
}

// info is the payload's workspace block.
func (r *runTree) info() *adapters.WorkspaceInfo {
	return &adapters.WorkspaceInfo{Name: r.name, Path: r.tree.Path, Branch: r.tree.Branch, Base: r.tree.Base}
}

// begin readies the worktree of in's run when its agent works in a
// workspace (nil when it does not): made if needed, and put back where the
// invocation's first run began when this is a run again after a crash. It
// points the run at it: the adapter's working folder, the payload's
// workspace, an ACP agent's session folder.
func (w *workspaces) begin(ctx context.Context, inv ledger.Invocation, cfg *config.Config, in *prepared) (*runTree, error) {
	if in.workspace == "" || in.startErr != nil {
		return nil, nil
	}
	ws, ok := cfg.Workspaces[in.workspace]
	if !ok {
		return nil, fmt.Errorf("the workspace %q is not in this coordinator's config", in.workspace)
	}
	l := w.pairLock(inv.Thread, inv.Participant)
	l.Lock()
	rt := &runTree{name: in.workspace, unlock: l.Unlock}
	var err error
	if rt.tree, err = w.ensure(ctx, inv.Thread, in.p.Thread.Name, inv.Participant, in.workspace, ws); err != nil {
		rt.done()
		return nil, err
	}
	head, err := w.git.Head(ctx, rt.tree.Path)
	if err != nil {
		rt.done()
		return nil, err
	}
	var again bool
	if rt.parent, again, err = w.db.RunParent(ctx, inv.ID, head); err != nil {
		rt.done()
		return nil, err
	}
	if again {
		// A run of this invocation began before and was cut short (a
		// crash, a stop): what it left, a half-made commit too, goes.
		w.log.Info("a run begins again where its first run began; resetting its worktree", "id", inv.ID, "participant", inv.Participant, "parent", rt.parent)
		if err := w.git.ClearLocks(ctx, rt.tree); err != nil {
			rt.done()
			return nil, err
		}
		if err := w.git.ResetTo(ctx, rt.tree, rt.parent); err != nil {
			rt.done()
			return nil, err
		}
	}
	if err := w.tracker().Watch(rt.tree); err != nil {
		w.log.Warn("cannot watch a worktree; its commits stage it whole", "path", rt.tree.Path, "err", err)
	}
	in.spec.Dir = rt.tree.Path
	in.p.Workspace = rt.info()
	if in.payload != nil {
		in.payload = mustJSON(in.p)
	}
	return rt, nil
}

// beginWorkspace readies in's worktree (workspaces.begin); a worktree
// that cannot be made fails the run with the reason.
func (c *Coordinator) beginWorkspace(ctx context.Context, inv ledger.Invocation, cfg *config.Config, in *prepared) {
	tree, err := c.ws.begin(ctx, inv, cfg, in)
	if err != nil {
		in.startErr = fmt.Errorf("its worktree in the workspace %q could not be readied: %w", in.workspace, err)
		return
	}
	in.tree = tree
}

// ensure returns the pair's worktree, making it first when it has none
// yet: the ledger row, then git, then the row marked ready.
func (w *workspaces) ensure(ctx context.Context, thread, threadName, participant, name string, ws config.Workspace) (workspace.Tree, error) {
	row, ok, err := w.db.Worktree(ctx, thread, participant)
	if err != nil {
		return workspace.Tree{}, err
	}
	if ok && row.State == ledger.WorktreeReady && row.Workspace == name {
		t := treeOf(row)
		if _, err := w.git.Head(ctx, t.Path); err == nil {
			return t, nil
		}
		// Its folder is gone (removed by hand): made again on its branch.
	}
	if ok && row.Workspace != name {
		return workspace.Tree{}, fmt.Errorf("%s already works in the workspace %q in this thread; merge or discard that change before it works in %q", participant, row.Workspace, name)
	}
	if !ok {
		if row, err = w.beginRow(ctx, thread, threadName, participant, name, ws); err != nil {
			return workspace.Tree{}, err
		}
	}
	t := treeOf(row)
	l := w.repoLock(t.Repo)
	l.Lock()
	err = w.git.Ensure(ctx, t)
	l.Unlock()
	if err != nil {
		return workspace.Tree{}, fmt.Errorf("make the worktree of %s: %w", participant, err)
	}
	if row.State != ledger.WorktreeReady {
		if err := w.db.SetWorktreeState(ctx, thread, participant, ledger.WorktreeReady); err != nil {
			return workspace.Tree{}, err
		}
	}
	return t, nil
}

// beginRow records the pair's new worktree (state making) before git
// makes it, from the tip of the workspace's base (else its repository's
// current branch).
func (w *workspaces) beginRow(ctx context.Context, thread, threadName, participant, name string, ws config.Workspace) (ledger.Worktree, error) {
	base := ws.Base
	if base == "" {
		var err error
		if base, err = w.git.CurrentBranch(ctx, ws.Repo); err != nil {
			return ledger.Worktree{}, err
		}
		if base == "" {
			return ledger.Worktree{}, fmt.Errorf("the workspace %q names no base and its repository %s is on no branch", name, ws.Repo)
		}
	}
	return w.db.BeginWorktree(ctx, ledger.Worktree{Thread: thread, Participant: participant, Workspace: name, Repo: ws.Repo,
		Path: workspace.TreePath(w.dir, thread, participant), Branch: workspace.BranchName(thread, threadName, participant), Base: base})
}

func treeOf(row ledger.Worktree) workspace.Tree {
	return workspace.Tree{Repo: row.Repo, Path: row.Path, Branch: row.Branch, Base: row.Base}
}

// commit commits what rt's run changed and sets meta.change on the last
// of o's posts (the reply): nothing when the run posts nothing or changed
// nothing. A failure is logged and the reply posted without it: what the
// run changed stays in the worktree, and the next run's change holds it.
func (w *workspaces) commit(ctx context.Context, inv ledger.Invocation, rt *runTree, o *ledger.Outcome) {
	if rt == nil || o.Status != ledger.StatusSucceeded || len(o.Posts) == 0 {
		return
	}
	last := &o.Posts[len(o.Posts)-1]
	ch, err := w.change(ctx, inv, rt, workspace.Subject(textOf(last.Content), "Change by "+inv.Participant))
	if err != nil {
		w.log.Error("cannot commit a run's change; the reply goes without it", "id", inv.ID, "participant", inv.Participant, "err", err)
		return
	}
	if ch == nil {
		return
	}
	if last.Meta.Extra == nil {
		last.Meta.Extra = map[string]json.RawMessage{}
	}
	last.Meta.Extra[agentbridge.MetaChange] = mustJSON(ch)
}

// change commits the worktree and describes what changed since the run's
// parent (nil when nothing did): files, +/−, and the diff stored as an
// attachment.
func (w *workspaces) change(ctx context.Context, inv ledger.Invocation, rt *runTree, subject string) (*agentbridge.Change, error) {
	commit, err := w.git.CommitTracked(ctx, w.tracker(), rt.tree, workspace.Commit{Author: inv.Participant, Subject: subject,
		Thread: inv.Thread, Event: inv.TriggerID, When: time.Now()})
	if err != nil {
		return nil, err
	}
	if commit == rt.parent {
		return nil, nil
	}
	files, added, removed, err := w.git.Files(ctx, rt.tree.Path, rt.parent, commit)
	if err != nil {
		return nil, err
	}
	ch := &agentbridge.Change{Workspace: rt.name, Branch: rt.tree.Branch, Base: rt.tree.Base, Commit: commit, Parent: rt.parent,
		Files: files, Added: added, Removed: removed}
	if ch.Files == nil {
		ch.Files = []agentbridge.ChangeFile{}
	}
	diff, cut, err := w.git.Diff(ctx, rt.tree.Path, rt.parent, commit, agentbridge.MaxDiffBytes)
	if err != nil {
		return nil, err
	}
	ch.DiffTruncated = cut
	name := fmt.Sprintf("%s-%s.diff", workspace.RefPart(inv.Participant), commit[:min(12, len(commit))])
	if ch.Diff, err = w.upload(withClaim(ctx, inv), inv.Thread, name, diff); err != nil {
		return nil, fmt.Errorf("store the diff: %w", err)
	}
	return ch, nil
}

// textOf is a message's content as text.
func textOf(content []byte) string {
	return agentbridge.Event{Content: content}.Text()
}

// Notice kind of a merge's or discard's notice.
const noticeChange = "change"

// control records a person's change control for the op to be carried out
// by this coordinator, when it has the pair's worktree (only the
// coordinator that has it does), before the follow loop's cursor passes
// it; the op runs off the follow loop (startOp).
func (w *workspaces) control(ctx context.Context, e agentbridge.Event, ctl agentbridge.Control, humans agentbridge.Humans) error {
	if ctl.Change == nil || !humans.Has(e.From) {
		return nil
	}
	p := ctl.Change.Participant()
	row, ok, err := w.db.Worktree(ctx, e.Thread, p)
	if err != nil || !ok {
		return err
	}
	op := ledger.ChangeOp{EventID: e.ID, Thread: e.Thread, Participant: p, Op: ledger.OpDiscard, Sender: e.From}
	if m := ctl.Change.Merge; m != nil {
		op.Op, op.Into, op.Squash = ledger.OpMerge, m.Into, m.Squash
		if op.Into == "" {
			op.Into = row.Base
		}
	}
	if err := w.db.BeginChangeOp(ctx, op); err != nil {
		return err
	}
	got, err := w.db.ChangeOp(ctx, e.ID)
	if err != nil {
		return err
	}
	w.startOp(got)
	return nil
}

// startOp carries out op in its own goroutine, which the shutdown waits
// for.
func (w *workspaces) startOp(op ledger.ChangeOp) {
	w.background(func(work context.Context) {
		if err := w.runOp(context.WithoutCancel(work), op); err != nil {
			w.log.Error("cannot finish a merge or discard; the next start finishes it", "event", op.EventID, "participant", op.Participant, "err", err)
		}
	})
}

// runOp carries op from where it stands to its end: a merge is checked
// and its commit made without touching the repository (a refusal posts
// its notice), then the repository moved to it; a merged or discarded
// branch is removed with its worktree.
func (w *workspaces) runOp(ctx context.Context, op ledger.ChangeOp) error {
	l := w.pairLock(op.Thread, op.Participant)
	l.Lock()
	defer l.Unlock()
	// Where it stands now: a second start of the same op (the follow loop
	// handed its control again, or recovery) finds it further on.
	op, err := w.db.ChangeOp(ctx, op.EventID)
	if err != nil || op.State == ledger.OpDone {
		return err
	}
	row, ok, err := w.db.Worktree(ctx, op.Thread, op.Participant)
	switch {
	case err != nil:
		return err
	case !ok && (op.State == ledger.OpMerged || op.State == ledger.OpDiscarded):
		// Removed already: a crash came before the op was closed.
		return w.db.ChangeOpDone(ctx, op.EventID)
	case !ok:
		return w.end(ctx, op, ledger.OpRefused, fmt.Sprintf("%s has no change in this thread any more: nothing to %s.", op.Participant, op.Op), nil)
	}
	t := treeOf(row)
	rl := w.repoLock(t.Repo)
	rl.Lock()
	defer rl.Unlock()
	return w.stepOp(ctx, op, t)
}

// stepOp carries op on from its state, with the pair's and the
// repository's locks held.
func (w *workspaces) stepOp(ctx context.Context, op ledger.ChangeOp, t workspace.Tree) error {
	var err error
	switch op.State {
	case ledger.OpBegun:
		if op.Op == ledger.OpDiscard {
			if err := w.end(ctx, op, ledger.OpDiscarded, fmt.Sprintf("Discarded %s's change: its branch %s and worktree are removed.", op.Participant, t.Branch), nil); err != nil {
				return err
			}
			return w.remove(ctx, op, t)
		}
		if op, err = w.mergeCommit(ctx, op, t); err != nil || op.State != ledger.OpCommitted {
			return err
		}
		fallthrough
	case ledger.OpCommitted:
		// A merge a crash cut short may have left git's locks.
		if err := w.git.ClearRepoLocks(ctx, t.Repo, op.Into, w.started); err != nil {
			return err
		}
		if err := w.fastForward(ctx, op, t); err != nil || !w.ended(ctx, op.EventID, ledger.OpMerged) {
			return err
		}
		return w.remove(ctx, op, t)
	case ledger.OpMerged, ledger.OpDiscarded:
		return w.remove(ctx, op, t)
	}
	return nil
}

// ended reports whether op ended in state.
func (w *workspaces) ended(ctx context.Context, eventID, state string) bool {
	o, err := w.db.ChangeOp(ctx, eventID)
	return err == nil && o.State == state
}

// mergeCommit checks the repository and makes the merge commit, recorded
// before the repository moves; a refusal ends op with its notice.
func (w *workspaces) mergeCommit(ctx context.Context, op ledger.ChangeOp, t workspace.Tree) (ledger.ChangeOp, error) {
	var refused *workspace.Refused
	err := w.git.CheckRepo(ctx, t.Repo, op.Into)
	if err == nil {
		var nothing bool
		if nothing, err = w.git.IsAncestor(ctx, t.Repo, "refs/heads/"+t.Branch, "refs/heads/"+op.Into); err == nil && nothing {
			return op, w.end(ctx, op, ledger.OpRefused, fmt.Sprintf("%s's branch %s holds nothing that %s lacks: nothing to merge.", op.Participant, t.Branch, op.Into), nil)
		}
	}
	if err == nil {
		msg := fmt.Sprintf("Merge %s's change (%s) into %s\n\nAgent-Bridge-Thread: %s\nAgent-Bridge-Event: %s\n", op.Participant, t.Branch, op.Into, op.Thread, op.EventID)
		if op.Squash {
			msg = fmt.Sprintf("%s's change (%s, squashed)\n\nAgent-Bridge-Thread: %s\nAgent-Bridge-Event: %s\n", op.Participant, t.Branch, op.Thread, op.EventID)
		}
		op.Commit, op.From, err = w.git.MergeCommit(ctx, workspace.Merge{Repo: t.Repo, Into: op.Into, Branch: t.Branch, Squash: op.Squash,
			Message: msg, Who: op.Sender, When: time.Now()})
	}
	switch {
	case errors.As(err, &refused):
		return op, w.end(ctx, op, ledger.OpRefused, fmt.Sprintf("Did not merge %s's change: %s. Nothing was changed.", op.Participant, refused.Reason), refused.Conflicts)
	case err != nil:
		return op, err
	}
	if err := w.db.MergeCommitted(ctx, op.EventID, op.From, op.Commit); err != nil {
		return op, err
	}
	op.State = ledger.OpCommitted
	return op, nil
}

// fastForward moves the repository's branch to the merge commit and ends
// op with its notice; a refusal ends it with that notice instead.
func (w *workspaces) fastForward(ctx context.Context, op ledger.ChangeOp, t workspace.Tree) error {
	err := w.git.FastForward(ctx, t.Repo, op.Into, op.From, op.Commit)
	var refused *workspace.Refused
	if errors.As(err, &refused) {
		return w.end(ctx, op, ledger.OpRefused, fmt.Sprintf("Did not merge %s's change: %s. Nothing was changed.", op.Participant, refused.Reason), nil)
	}
	if err != nil {
		return err
	}
	how := "merged"
	if op.Squash {
		how = "squashed"
	}
	return w.end(ctx, op, ledger.OpMerged, fmt.Sprintf("Merged %s's change into %s (%s) as commit %s; its branch %s and worktree are removed.",
		op.Participant, op.Into, how, shortCommit(op.Commit), t.Branch), nil)
}

func shortCommit(c string) string { return c[:min(12, len(c))] }

// remove removes the pair's worktree and branch, then forgets them and
// closes op.
func (w *workspaces) remove(ctx context.Context, op ledger.ChangeOp, t workspace.Tree) error {
	w.forget(t.Path)
	if err := w.git.Remove(ctx, t); err != nil {
		return err
	}
	if err := w.db.DeleteWorktree(ctx, op.Thread, op.Participant); err != nil {
		return err
	}
	return w.db.ChangeOpDone(ctx, op.EventID)
}

// end records op's outcome with its notice, then posts the notice.
func (w *workspaces) end(ctx context.Context, op ledger.ChangeOp, state, text string, conflicts []string) error {
	cfg := w.config()
	res := agentbridge.ChangeResult{Participant: op.Participant, Op: op.Op, State: state, Into: op.Into, Conflicts: conflicts}
	if state == ledger.OpMerged {
		res.Commit = op.Commit
	}
	if len(conflicts) > 0 {
		text = fmt.Sprintf("Did not merge %s's change into %s: it conflicts in %s. Nothing was changed.", op.Participant, op.Into, strings.Join(conflicts, ", "))
	}
	n := ledger.Notice{TriggerID: op.EventID, Kind: noticeChange, Thread: op.Thread, Post: agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: agentbridge.ToAll, Content: mustJSON(text),
		Meta: agentbridge.Meta{ReplyTo: op.EventID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", noticeChange, state},
			Extra: map[string]json.RawMessage{agentbridge.MetaChangeResult: mustJSON(res)}},
	}}
	ended, err := w.db.EndChangeOp(ctx, op, state, n)
	if err != nil || !ended {
		return err // a second run of the op: its notice is the first's
	}
	w.postNotice(n)
	return nil
}

// recover finishes what a previous run left: the repositories' worktree
// lists pruned, worktrees half made made, those being removed removed,
// and the open merges and discards carried on. A run cut short is reset
// when it runs again (begin).
func (w *workspaces) recover(ctx context.Context) error {
	cfg := w.config()
	rows, err := w.db.Worktrees(ctx, "")
	if err != nil {
		return err
	}
	pruned := map[string]bool{}
	for _, ws := range cfg.Workspaces {
		pruned[ws.Repo] = true
		if err := w.git.Prune(ctx, ws.Repo); err != nil {
			w.log.Warn("cannot prune a workspace's worktrees", "repo", ws.Repo, "err", err)
		}
	}
	open, err := w.db.OpenChangeOps(ctx)
	if err != nil {
		return err
	}
	busy := map[pairKey]bool{}
	for _, op := range open {
		busy[pairKey{op.Thread, op.Participant}] = true
	}
	for _, row := range rows {
		if !pruned[row.Repo] {
			pruned[row.Repo] = true
			_ = w.git.Prune(ctx, row.Repo)
		}
		if err := w.recoverRow(ctx, row, busy[pairKey{row.Thread, row.Participant}]); err != nil {
			w.log.Warn("cannot finish a worktree's step", "thread", row.Thread, "participant", row.Participant, "state", row.State, "err", err)
		}
	}
	for _, op := range open {
		w.startOp(op)
	}
	return nil
}

// recoverRow finishes row's step: a worktree half made is made, one being
// removed (by no op still open) is removed.
func (w *workspaces) recoverRow(ctx context.Context, row ledger.Worktree, opOpen bool) error {
	t := treeOf(row)
	switch {
	case row.State == ledger.WorktreeMaking:
		if err := w.git.Ensure(ctx, t); err != nil {
			return err
		}
		return w.db.SetWorktreeState(ctx, row.Thread, row.Participant, ledger.WorktreeReady)
	case row.State == ledger.WorktreeRemoving && !opOpen:
		w.forget(t.Path)
		if err := w.git.Remove(ctx, t); err != nil {
			return err
		}
		return w.db.DeleteWorktree(ctx, row.Thread, row.Participant)
	}
	return nil
}

// worktreeDir is the folder worktrees are made in: dir, else a folder in
// the user's cache; made absolute, as git records it.
func worktreeDir(dir string) (string, error) {
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "agent-bridge", "worktrees")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("the worktrees folder %s: %w", dir, err)
	}
	return abs, nil
}

// checkGit says at start when the config has workspaces and no git is on
// the PATH: every run in a workspace would fail.
func (w *workspaces) checkGit() {
	if len(w.config().Workspaces) == 0 {
		return
	}
	if _, err := workspace.LookGit(); err != nil {
		w.log.Error(err.Error())
	}
}
