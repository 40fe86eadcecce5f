-- The coordinator's ledger: cursors, routing decisions, invocation records
-- and pending notices. See docs/delivery.md.
CREATE TABLE cursors (
	name  TEXT PRIMARY KEY,
	value INTEGER NOT NULL
);

CREATE TABLE thread_cursors (
	thread TEXT PRIMARY KEY,
	seq    INTEGER NOT NULL
);

CREATE TABLE decisions (
	event_id   TEXT PRIMARY KEY,
	thread     TEXT NOT NULL,
	seq        INTEGER NOT NULL,
	gseq       INTEGER NOT NULL,
	decision   TEXT NOT NULL,
	created_at TEXT NOT NULL
);

CREATE TABLE invocations (
	id                 INTEGER PRIMARY KEY,
	thread             TEXT NOT NULL,
	trigger_id         TEXT NOT NULL,
	trigger_seq        INTEGER NOT NULL,
	trigger_gseq       INTEGER NOT NULL,
	participant        TEXT NOT NULL,
	agent              TEXT NOT NULL,
	command            TEXT NOT NULL,
	hop                INTEGER NOT NULL,
	status             TEXT NOT NULL,
	exit_code          INTEGER,
	error              TEXT NOT NULL DEFAULT '',
	queued_at          TEXT NOT NULL,
	started_at         TEXT NOT NULL DEFAULT '',
	finished_at        TEXT NOT NULL DEFAULT '',
	duration_ms        INTEGER NOT NULL DEFAULT 0,
	reply_event_id     TEXT NOT NULL DEFAULT '',
	pending_post       TEXT NOT NULL DEFAULT '',
	output_bytes       INTEGER NOT NULL DEFAULT 0,
	stderr_tail        TEXT NOT NULL DEFAULT '',
	pid                INTEGER NOT NULL DEFAULT 0,
	pgid               INTEGER NOT NULL DEFAULT 0,
	process_started_at TEXT NOT NULL DEFAULT '',
	UNIQUE (trigger_id, participant)
);
CREATE INDEX invocations_thread ON invocations (thread, id);
CREATE INDEX invocations_status ON invocations (status, id);

CREATE TABLE notices (
	trigger_id      TEXT NOT NULL,
	kind            TEXT NOT NULL,
	thread          TEXT NOT NULL,
	post            TEXT NOT NULL,
	posted_event_id TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (trigger_id, kind)
);
