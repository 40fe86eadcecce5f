package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Tracker notes which paths of the worktrees it watches changed since
// their last commit, so that a commit stages only those paths instead of
// having git stat every file of the worktree (`git add --all` on 10,000
// files is most of what a workspace adds to a run; docs/performance.md).
// It is an optimisation only: whenever it cannot vouch for its list (the
// first commit after it began watching a worktree, a lost event, an index
// written by someone else, a .gitignore changed, a path git refuses), the
// commit stages the whole worktree as before. It uses inotify, so it
// works on Linux; elsewhere NewTracker returns nil, and a nil Tracker
// always says "stage everything".
type Tracker struct {
	fw *fsnotify.Watcher
	// mark is a folder of the tracker's own, watched like the worktrees:
	// a file made there comes out of the one event queue after every
	// event that was queued before it (sync).
	mark string

	mu    sync.Mutex
	trees map[string]*tracked // by worktree path
	// dirs are the folders watched: a watched folder moved loses its
	// watch (fsnotify drops it on IN_MOVE_SELF), so its tree is walked
	// again.
	dirs map[string]bool
	// marks are the sync calls waiting for their mark file's event.
	marks map[string]chan struct{}
	seq   int
	done  chan struct{}
}

// tracked is what the tracker knows of one worktree since its last commit.
type tracked struct {
	root string
	// ino is the worktree folder's inode when it was watched: a folder
	// removed and made again is watched again.
	ino uint64
	// index is the worktree's index file; indexStat what it was after
	// the tracker's last commit (its own write), and tree what that
	// commit's index held.
	index     string
	indexStat string
	tree      string
	// all means the list cannot be trusted: stage everything.
	all bool
	// rewalk means a watched folder was moved: its watch may be gone,
	// so the tree's folders are watched again at the next commit.
	rewalk bool
	// created and touched are the paths (relative, slash-separated)
	// changed since the last commit; created those whose first event
	// was their creation (they were not there at that commit).
	touched map[string]bool
	created map[string]bool
}

// maxTracked is the most paths staged by name; above it, everything is.
const maxTracked = 2000

// NewTracker starts a tracker that keeps its mark files in dir (made if
// needed); it is nil, with no error, where inotify is not available.
func NewTracker(dir string) (*Tracker, error) {
	if runtime.GOOS != "linux" {
		return nil, nil
	}
	mark := filepath.Join(dir, ".marks")
	// A process killed while it waited for a mark left that mark file:
	// a later tracker writing the same name would get no creation event
	// and wait for it forever. The folder is this tracker's alone.
	if err := os.RemoveAll(mark); err != nil {
		return nil, fmt.Errorf("clear the tracker's folder: %w", err)
	}
	if err := os.MkdirAll(mark, 0o700); err != nil {
		return nil, fmt.Errorf("make the tracker's folder: %w", err)
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("start watching worktrees: %w", err)
	}
	if err := fw.Add(mark); err != nil {
		fw.Close()
		return nil, fmt.Errorf("watch %s: %w", mark, err)
	}
	t := &Tracker{fw: fw, mark: mark, trees: map[string]*tracked{}, dirs: map[string]bool{}, marks: map[string]chan struct{}{}, done: make(chan struct{})}
	go t.loop()
	return t, nil
}

// Close stops the tracker and waits for its goroutines.
func (t *Tracker) Close() error {
	if t == nil {
		return nil
	}
	err := t.fw.Close()
	<-t.done
	return err
}

// loop records the events until the watcher is closed.
func (t *Tracker) loop() {
	defer close(t.done)
	for {
		select {
		case ev, ok := <-t.fw.Events:
			if !ok {
				return
			}
			t.event(ev)
		case _, ok := <-t.fw.Errors:
			if !ok {
				return
			}
			// A lost event (the queue overflowed) could be anyone's.
			t.mu.Lock()
			for _, tr := range t.trees {
				tr.all = true
			}
			t.mu.Unlock()
		}
	}
}

// event records ev in the worktree it is in.
func (t *Tracker) event(ev fsnotify.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if filepath.Dir(ev.Name) == t.mark {
		if ch, ok := t.marks[filepath.Base(ev.Name)]; ok && ev.Has(fsnotify.Create) {
			delete(t.marks, filepath.Base(ev.Name))
			close(ch)
		}
		return
	}
	tr, rel, ok := t.treeOf(ev.Name)
	if !ok || rel == ".git" || rel == Excluded || strings.HasPrefix(rel, Excluded+"/") {
		return
	}
	t.touch(tr, rel, ev)
}

// treeOf finds the worktree that holds name, and name's path in it.
func (t *Tracker) treeOf(name string) (tr *tracked, rel string, ok bool) {
	for root, tr := range t.trees {
		rel, err := filepath.Rel(root, name)
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
			continue
		}
		return tr, filepath.ToSlash(rel), true
	}
	return nil, "", false
}

// touch notes ev at rel in worktree tr; t.mu is held.
func (t *Tracker) touch(tr *tracked, rel string, ev fsnotify.Event) {
	if ev.Has(fsnotify.Rename) && t.dirs[ev.Name] {
		tr.all, tr.rewalk = true, true
	}
	if ev.Has(fsnotify.Rename) || ev.Has(fsnotify.Remove) {
		delete(t.dirs, ev.Name)
	}
	if !tr.touched[rel] && ev.Has(fsnotify.Create) {
		tr.created[rel] = true
	}
	tr.touched[rel] = true
	if ev.Has(fsnotify.Create) {
		// A new folder: what is in it is staged by its name this
		// time, and watched from now on.
		if fi, err := os.Lstat(ev.Name); err == nil && fi.IsDir() {
			if err := t.watchDirs(ev.Name); err != nil {
				tr.all = true
			}
		}
	}
}

// watchDirs watches dir and every folder under it but .git.
func (t *Tracker) watchDirs(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // gone while walked: its removal is an event
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if d.Name() == ".git" && p != dir {
			return filepath.SkipDir
		}
		if err := t.fw.Add(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return fmt.Errorf("watch %s: %w", p, err)
		}
		t.dirs[p] = true
		return nil
	})
}

// Watch begins watching tr's worktree when the tracker does not yet (or
// its folder was made again since); its next commit stages everything.
func (t *Tracker) Watch(tr Tree) error {
	if t == nil {
		return nil
	}
	ino, err := inode(tr.Path)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if w, ok := t.trees[tr.Path]; ok && w.ino == ino {
		return nil
	}
	index, err := indexFile(tr.Path)
	if err != nil {
		return err
	}
	w := &tracked{root: tr.Path, ino: ino, index: index, all: true, touched: map[string]bool{}, created: map[string]bool{}}
	t.trees[tr.Path] = w
	// Watched from the worktree's folder down, the Excluded folder too
	// (its events are dropped): a folder git ignores may hold a file it
	// does not ignore.
	if err := t.watchDirs(tr.Path); err != nil {
		delete(t.trees, tr.Path)
		return err
	}
	return nil
}

// Forget stops tracking the worktree at path (removed); its folders'
// watches went with them.
func (t *Tracker) Forget(path string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	delete(t.trees, path)
	for d := range t.dirs {
		if d == path || strings.HasPrefix(d, path+string(filepath.Separator)) {
			delete(t.dirs, d)
		}
	}
	t.mu.Unlock()
}

// syncWait bounds sync: the tracker is an optimisation, and a commit
// that cannot vouch for its list within it stages everything instead of
// waiting on an event that may never come.
const syncWait = 10 * time.Second

// sync returns once every event queued before it was recorded.
func (t *Tracker) sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	t.mu.Lock()
	t.seq++
	name := "m" + strconv.Itoa(t.seq)
	ch := make(chan struct{})
	t.marks[name] = ch
	t.mu.Unlock()
	p := filepath.Join(t.mark, name)
	// Made new (O_EXCL): only a file's creation is its mark's event.
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.dropMark(name)
		return fmt.Errorf("mark the tracker's queue: %w", err)
	}
	f.Close()
	defer os.Remove(p)
	select {
	case <-ch:
		return nil
	case <-t.done:
		return errors.New("the tracker is stopped")
	case <-ctx.Done():
		t.dropMark(name)
		return ctx.Err()
	}
}

// dropMark stops waiting for the mark name.
func (t *Tracker) dropMark(name string) {
	t.mu.Lock()
	delete(t.marks, name)
	t.mu.Unlock()
}

// take returns the paths to stage in tr's worktree and starts a new list:
// ok false means stage everything. When the index was written since the
// tracker's last commit, check is the tree it held then: the list holds
// only if the index still does.
func (t *Tracker) take(ctx context.Context, tr Tree) (paths []string, check string, ok bool) {
	if t == nil || t.sync(ctx) != nil {
		return nil, "", false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	w, found := t.trees[tr.Path]
	if !found {
		return nil, "", false
	}
	touched, created, all := w.touched, w.created, w.all
	w.touched, w.created, w.all = map[string]bool{}, map[string]bool{}, false
	if w.rewalk {
		// Every event before the mark is handled, the moved folder's
		// watch dropped too: watched again from here, this commit
		// staging everything.
		w.rewalk = false
		if err := t.watchDirs(w.root); err != nil {
			w.all = true
		}
	}
	if all || len(touched) > maxTracked {
		return nil, "", false
	}
	if statKey(w.index) != w.indexStat {
		check = w.tree
	}
	for p := range touched {
		if p == ".gitignore" || strings.HasSuffix(p, "/.gitignore") {
			return nil, "", false // files it ignored may no longer be
		}
		if _, err := os.Lstat(filepath.Join(tr.Path, filepath.FromSlash(p))); err != nil && created[p] {
			continue // made and gone since the last commit: git never had it
		}
		paths = append(paths, p)
	}
	return paths, check, true
}

// committed records the index as the tracker's commit left it, holding
// tree.
func (t *Tracker) committed(tr Tree, tree string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if w, ok := t.trees[tr.Path]; ok {
		w.indexStat, w.tree = statKey(w.index), tree
	}
}

// again marks tr's list as not to be trusted (a staging by name failed).
func (t *Tracker) again(tr Tree) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if w, ok := t.trees[tr.Path]; ok {
		w.all = true
	}
}

// statKey is what says a file was written again: git writes its index
// to a new file renamed over it, so a new inode, time or size.
func statKey(p string) string {
	fi, err := os.Stat(p)
	if err != nil {
		return "missing"
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	if st == nil {
		return "unknown"
	}
	return fmt.Sprintf("%d %d %d", st.Ino, fi.ModTime().UnixNano(), fi.Size())
}

func inode(p string) (uint64, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, fmt.Errorf("watch the worktree %s: %w", p, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("watch the worktree %s: no inode", p)
	}
	return st.Ino, nil
}

// indexFile is the index of the worktree at dir: its .git file names
// the worktree's own folder in the repository ("gitdir: ...").
func indexFile(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, ".git"))
	if err != nil {
		return "", fmt.Errorf("read the worktree's .git file: %w", err)
	}
	gitdir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return "", fmt.Errorf("the worktree's .git file in %s names no gitdir", dir)
	}
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(dir, gitdir)
	}
	return filepath.Join(gitdir, "index"), nil
}
