-- The coordinator's ledger on PostgreSQL: the same tables as the SQLite
-- migrations/0001_init.sql, one for one. decisions and notices get an
-- explicit rowid (SQLite has one implicitly), so that queries ordering by
-- rowid work on both.
CREATE TABLE cursors (
	name  text PRIMARY KEY,
	value bigint NOT NULL
);

CREATE TABLE thread_cursors (
	thread text PRIMARY KEY,
	seq    bigint NOT NULL
);

CREATE TABLE decisions (
	rowid      bigserial UNIQUE,
	event_id   text PRIMARY KEY,
	thread     text NOT NULL,
	seq        bigint NOT NULL,
	gseq       bigint NOT NULL,
	decision   text NOT NULL,
	created_at text NOT NULL
);

CREATE TABLE invocations (
	id                 bigserial PRIMARY KEY,
	thread             text NOT NULL,
	trigger_id         text NOT NULL,
	trigger_seq        bigint NOT NULL,
	trigger_gseq       bigint NOT NULL,
	participant        text NOT NULL,
	agent              text NOT NULL,
	command            text NOT NULL,
	hop                bigint NOT NULL,
	status             text NOT NULL,
	exit_code          bigint,
	error              text NOT NULL DEFAULT '',
	queued_at          text NOT NULL,
	started_at         text NOT NULL DEFAULT '',
	finished_at        text NOT NULL DEFAULT '',
	duration_ms        bigint NOT NULL DEFAULT 0,
	reply_event_id     text NOT NULL DEFAULT '',
	pending_post       text NOT NULL DEFAULT '',
	output_bytes       bigint NOT NULL DEFAULT 0,
	stderr_tail        text NOT NULL DEFAULT '',
	pid                bigint NOT NULL DEFAULT 0,
	pgid               bigint NOT NULL DEFAULT 0,
	process_started_at text NOT NULL DEFAULT '',
	UNIQUE (trigger_id, participant)
);
CREATE INDEX invocations_thread ON invocations (thread, id);
CREATE INDEX invocations_status ON invocations (status, id);

CREATE TABLE notices (
	rowid           bigserial UNIQUE,
	trigger_id      text NOT NULL,
	kind            text NOT NULL,
	thread          text NOT NULL,
	post            text NOT NULL,
	posted_event_id text NOT NULL DEFAULT '',
	PRIMARY KEY (trigger_id, kind)
);
