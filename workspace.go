package agentbridge

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Workspaces (contract 8.1): a coordinator's config names git working
// copies ("workspaces"); an agent entry, an invite's profile or a person's
// thread control picks one by name, never by path. The coordinator gives
// each (thread, participant) a worktree of its own, commits what a run
// changed, and the reply carries the change as meta.change. A person
// merges or discards it with the change control.

// WorkspaceNamePattern is what a workspace name may be: a short word that
// names a config entry, never a path.
var WorkspaceNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// MetaChange is the meta key of a reply's change (Change).
const MetaChange = "change"

// DiffType is the type of a change's unified diff attachment.
const DiffType = "text/x-diff"

// MaxDiffBytes is where a change's diff attachment is cut (diff_truncated).
const MaxDiffBytes = 5 << 20

// Change statuses of a file.
const (
	ChangeAdded    = "added"
	ChangeModified = "modified"
	ChangeDeleted  = "deleted"
	ChangeRenamed  = "renamed"
)

// ChangeFile is one file of a change: its path (the new one for a
// rename), its status and its lines added and removed (0 and 0 for a
// binary file).
type ChangeFile struct {
	Path    string `json:"path"`
	From    string `json:"from,omitempty"`
	Status  string `json:"status"`
	Added   int    `json:"added"`
	Removed int    `json:"removed"`
}

// Change is meta.change: what one run changed in its worktree, committed
// on its branch (contract 8.1). Diff is the id of the unified diff's
// attachment (parent..commit).
type Change struct {
	Workspace     string       `json:"workspace"`
	Branch        string       `json:"branch"`
	Base          string       `json:"base"`
	Commit        string       `json:"commit"`
	Parent        string       `json:"parent"`
	Files         []ChangeFile `json:"files"`
	Added         int          `json:"added"`
	Removed       int          `json:"removed"`
	Diff          string       `json:"diff,omitempty"`
	DiffTruncated bool         `json:"diff_truncated,omitempty"`
}

// ChangeOf returns e's meta.change, if it carries one that decodes.
func ChangeOf(e Event) (Change, bool) {
	raw, ok := e.Meta.Extra[MetaChange]
	if !ok {
		return Change{}, false
	}
	var c Change
	if json.Unmarshal(raw, &c) != nil || c.Commit == "" {
		return Change{}, false
	}
	return c, true
}

// WorkspaceControl is {"workspace":{"name"}}: the workspace the thread's
// agents work in. An empty name goes back to what each agent's own config
// and invite say.
type WorkspaceControl struct {
	Name string `json:"name"`
}

// ChangeControl is {"change":{"merge":{...}}} or {"change":{"discard":
// {...}}}: a person lands or drops a participant's branch.
type ChangeControl struct {
	Merge   *MergeChange   `json:"merge,omitempty"`
	Discard *DiscardChange `json:"discard,omitempty"`
}

// Participant is whose branch the control acts on.
func (c ChangeControl) Participant() string {
	if c.Merge != nil {
		return c.Merge.Participant
	}
	if c.Discard != nil {
		return c.Discard.Participant
	}
	return ""
}

// MergeChange merges a participant's branch into Into (default: the
// workspace's base), squashed or as a merge commit.
type MergeChange struct {
	Participant string `json:"participant"`
	Into        string `json:"into,omitempty"`
	Squash      bool   `json:"squash,omitempty"`
}

// DiscardChange removes a participant's worktree and branch unmerged.
type DiscardChange struct {
	Participant string `json:"participant"`
}

// branchNamePattern bounds a merge's "into": a plain branch name, no
// option and no revision syntax.
var branchNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)

// ValidBranchName reports whether s may name the branch a change is
// merged into: letters, digits and . _ / -, not starting with a dash or
// a dot, and none of git's forbidden sequences.
func ValidBranchName(s string) bool {
	if !branchNamePattern.MatchString(s) {
		return false
	}
	for _, bad := range []string{"..", "//", "/.", ".lock"} {
		if strings.Contains(s, bad) {
			return false
		}
	}
	return s[len(s)-1] != '/' && s[len(s)-1] != '.'
}

func parseWorkspace(c *Control, v json.RawMessage) error {
	var raw struct {
		Name *string `json:"name"`
	}
	if json.Unmarshal(v, &raw) != nil || raw.Name == nil || (*raw.Name != "" && !WorkspaceNamePattern.MatchString(*raw.Name)) {
		return badControl("workspace", "A workspace control needs {\"name\": <a workspace name from the coordinator's config>} (letters, digits, . _ -), or {\"name\": \"\"} to go back to each agent's own.")
	}
	c.Workspace = &WorkspaceControl{Name: *raw.Name}
	return nil
}

func parseChange(c *Control, v json.RawMessage) error {
	var raw struct {
		Merge *struct {
			Participant *string `json:"participant"`
			Into        *string `json:"into"`
			Squash      *bool   `json:"squash"`
		} `json:"merge"`
		Discard *struct {
			Participant *string `json:"participant"`
		} `json:"discard"`
	}
	const want = "A change control needs {\"merge\": {\"participant\": ..., \"into\"?: <branch>, \"squash\"?: bool}} or {\"discard\": {\"participant\": ...}}."
	if json.Unmarshal(v, &raw) != nil || (raw.Merge == nil) == (raw.Discard == nil) {
		return badControl("change", want)
	}
	validP := func(p *string) bool { return p != nil && ParticipantIDPattern.MatchString(*p) }
	if raw.Discard != nil {
		if !validP(raw.Discard.Participant) {
			return badControl("change", want)
		}
		c.Change = &ChangeControl{Discard: &DiscardChange{Participant: *raw.Discard.Participant}}
		return nil
	}
	m := raw.Merge
	if !validP(m.Participant) {
		return badControl("change", want)
	}
	mc := &MergeChange{Participant: *m.Participant}
	if m.Into != nil && *m.Into != "" {
		if !ValidBranchName(*m.Into) {
			return badControl("change", "A merge's \"into\" must be a branch name (letters, digits, . _ / -), not %q.", Clip(*m.Into, QuoteRunes))
		}
		mc.Into = *m.Into
	}
	if m.Squash != nil {
		mc.Squash = *m.Squash
	}
	c.Change = &ChangeControl{Merge: mc}
	return nil
}

// WorkspaceOf is the workspace the thread picks for participant p: its
// invite's profile's, else the thread's workspace control's; "" when the
// thread picks none (the agent's own config entry decides then).
func (s ThreadState) WorkspaceOf(p string) string {
	if inv, ok := s.Invited(p); ok && inv.Profile.Workspace != "" {
		return inv.Profile.Workspace
	}
	return s.Workspace
}

// IgnoredUnknownWorkspace: a workspace control naming a workspace no live
// coordinator has.
const IgnoredUnknownWorkspace = "unknown_workspace"

// IgnoredWorkspace decides whether c's workspace control names a
// workspace none of the live coordinators in list has registered; nil
// when it names one, names none, or c has no workspace key.
func IgnoredWorkspace(c *Control, list []CoordinatorInfo) *Ignored {
	if c == nil || c.Workspace == nil || c.Workspace.Name == "" {
		return nil
	}
	var names []string
	for _, co := range list {
		if !co.Live {
			continue
		}
		if slices.Contains(co.Workspaces, c.Workspace.Name) {
			return nil
		}
		names = append(names, co.Workspaces...)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	known := "no live coordinator has a workspace"
	if len(names) > 0 {
		known = fmt.Sprintf("the live coordinators have %q", names)
	}
	return &Ignored{Code: IgnoredUnknownWorkspace, Reason: fmt.Sprintf(
		"no live coordinator has a workspace named %q (%s), so no agent works in it until one that has it registers", c.Workspace.Name, known)}
}

// HasWorkspace reports whether the registration lists workspace name.
func (reg Registration) HasWorkspace(name string) bool { return slices.Contains(reg.Workspaces, name) }

// MetaChangeResult is the meta key of a merge's or discard's notice
// (ChangeResult).
const MetaChangeResult = "change_result"

// States of a ChangeResult.
const (
	ChangeMerged    = "merged"
	ChangeDiscarded = "discarded"
	ChangeRefused   = "refused"
)

// ChangeResult is meta.change_result of the coordinator's notice answering
// a change control: what became of a person's merge or discard.
type ChangeResult struct {
	Participant string   `json:"participant"`
	Op          string   `json:"op"`
	State       string   `json:"state"`
	Into        string   `json:"into,omitempty"`
	Commit      string   `json:"commit,omitempty"`
	Conflicts   []string `json:"conflicts,omitempty"`
}

// ChangeResultOf returns e's meta.change_result, if it carries one.
func ChangeResultOf(e Event) (ChangeResult, bool) {
	raw, ok := e.Meta.Extra[MetaChangeResult]
	if !ok {
		return ChangeResult{}, false
	}
	var r ChangeResult
	if json.Unmarshal(raw, &r) != nil || r.Participant == "" {
		return ChangeResult{}, false
	}
	return r, true
}

// BranchChanges is one participant's branch as a thread tells it: the
// changes its replies carried since the branch was last merged or
// discarded, and what became of it (State "open", or the last result's).
type BranchChanges struct {
	Participant string `json:"participant"`
	Workspace   string `json:"workspace"`
	Branch      string `json:"branch"`
	Base        string `json:"base"`
	// State is "open" while the branch waits, else merged or discarded.
	State string `json:"state"`
	// Commit is the merge commit of a merged branch.
	Commit  string          `json:"commit,omitempty"`
	Changes []ChangeInReply `json:"changes"`
	Added   int             `json:"added"`
	Removed int             `json:"removed"`
}

// ChangeInReply is one reply's change, with the reply's id and first line.
type ChangeInReply struct {
	Event   string `json:"event"`
	Subject string `json:"subject"`
	Change
}

// ChangesOf reads a thread's events, oldest first, into each participant's
// branch, in the order participants first changed something: the changes
// since the last merge or discard (a branch merged or discarded is kept,
// with its state, until its participant changes something again).
func ChangesOf(events []Event) []BranchChanges {
	var out []BranchChanges
	at := map[string]int{}
	for _, e := range events {
		if r, ok := ChangeResultOf(e); ok && r.State != ChangeRefused {
			if i, ok := at[r.Participant]; ok {
				out[i].State, out[i].Commit = r.State, r.Commit
			}
			continue
		}
		c, ok := ChangeOf(e)
		if !ok {
			continue
		}
		i, seen := at[e.From]
		if !seen {
			i = len(out)
			at[e.From] = i
			out = append(out, BranchChanges{Participant: e.From})
		}
		b := &out[i]
		if b.State != "" && b.State != "open" {
			*b = BranchChanges{Participant: e.From}
		}
		b.Workspace, b.Branch, b.Base, b.State = c.Workspace, c.Branch, c.Base, "open"
		subject, _, _ := strings.Cut(strings.TrimSpace(e.Text()), "\n")
		b.Changes = append(b.Changes, ChangeInReply{Event: e.ID, Subject: Clip(subject, 72), Change: c})
		b.Added += c.Added
		b.Removed += c.Removed
	}
	return out
}
