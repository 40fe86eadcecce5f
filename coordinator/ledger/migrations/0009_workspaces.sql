-- Workspaces (contract 8.1). Each (thread, participant) worktree this
-- coordinator made, and its state: making (git worktree add begun),
-- ready, removing (a merge or discard removes it). A restart finishes a
-- making or removing one, so no worktree or branch is left orphaned.
CREATE TABLE worktrees (
	owner       TEXT NOT NULL,
	thread      TEXT NOT NULL,
	participant TEXT NOT NULL,
	workspace   TEXT NOT NULL,
	repo        TEXT NOT NULL,
	path        TEXT NOT NULL,
	branch      TEXT NOT NULL,
	base        TEXT NOT NULL,
	state       TEXT NOT NULL,
	created_at  TEXT NOT NULL,
	PRIMARY KEY (owner, thread, participant)
);

-- A person's merge or discard of a participant's branch, by its control
-- event: begun, committed (the merge commit is made, the repository not
-- yet moved), then a final state (merged, discarded, refused) recorded
-- with its notice in one transaction, and done once the worktree and
-- branch are removed. A restart finishes each from where it stands, so
-- no merge is done twice.
CREATE TABLE change_ops (
	owner        TEXT NOT NULL,
	event_id     TEXT NOT NULL,
	thread       TEXT NOT NULL,
	participant  TEXT NOT NULL,
	op           TEXT NOT NULL,
	into_branch  TEXT NOT NULL,
	squash       INTEGER NOT NULL,
	sender       TEXT NOT NULL,
	state        TEXT NOT NULL,
	from_commit  TEXT NOT NULL DEFAULT '',
	merge_commit TEXT NOT NULL DEFAULT '',
	created_at   TEXT NOT NULL,
	PRIMARY KEY (owner, event_id)
);

-- The worktree's HEAD when an invocation's run began in it: a run cut
-- short by a crash is run again from there (its half-made commit reset).
ALTER TABLE invocations ADD COLUMN ws_parent TEXT NOT NULL DEFAULT '';
