-- Workspaces (contract 8.1), as in the SQLite migrations/0009_workspaces.sql.
CREATE TABLE worktrees (
	owner       text NOT NULL,
	thread      text NOT NULL,
	participant text NOT NULL,
	workspace   text NOT NULL,
	repo        text NOT NULL,
	path        text NOT NULL,
	branch      text NOT NULL,
	base        text NOT NULL,
	state       text NOT NULL,
	created_at  text NOT NULL,
	PRIMARY KEY (owner, thread, participant)
);

CREATE TABLE change_ops (
	owner        text NOT NULL,
	event_id     text NOT NULL,
	thread       text NOT NULL,
	participant  text NOT NULL,
	op           text NOT NULL,
	into_branch  text NOT NULL,
	squash       boolean NOT NULL,
	sender       text NOT NULL,
	state        text NOT NULL,
	from_commit  text NOT NULL DEFAULT '',
	merge_commit text NOT NULL DEFAULT '',
	created_at   text NOT NULL,
	PRIMARY KEY (owner, event_id)
);

ALTER TABLE invocations ADD COLUMN ws_parent text NOT NULL DEFAULT '';
