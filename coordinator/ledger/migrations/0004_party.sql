-- Party mode (contract 5.7): an invocation is one (trigger, participant,
-- round); round 0 is every invocation outside party mode. SQLite cannot
-- change a table's UNIQUE constraint, so the table is rebuilt.
ALTER TABLE invocations RENAME TO invocations_before_party;

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
	input_tokens       INTEGER NOT NULL DEFAULT 0,
	output_tokens      INTEGER NOT NULL DEFAULT 0,
	cost_usd           REAL NOT NULL DEFAULT 0,
	progress_count     INTEGER NOT NULL DEFAULT 0,
	progress_bad       INTEGER NOT NULL DEFAULT 0,
	round              INTEGER NOT NULL DEFAULT 0,
	UNIQUE (trigger_id, participant, round)
);

INSERT INTO invocations (id, thread, trigger_id, trigger_seq, trigger_gseq, participant, agent, command, hop,
	status, exit_code, error, queued_at, started_at, finished_at, duration_ms, reply_event_id, pending_post,
	output_bytes, stderr_tail, pid, pgid, process_started_at,
	input_tokens, output_tokens, cost_usd, progress_count, progress_bad)
SELECT id, thread, trigger_id, trigger_seq, trigger_gseq, participant, agent, command, hop,
	status, exit_code, error, queued_at, started_at, finished_at, duration_ms, reply_event_id, pending_post,
	output_bytes, stderr_tail, pid, pgid, process_started_at,
	input_tokens, output_tokens, cost_usd, progress_count, progress_bad
FROM invocations_before_party;

DROP TABLE invocations_before_party;
CREATE INDEX invocations_thread ON invocations (thread, id);
CREATE INDEX invocations_status ON invocations (status, id);
-- Party turns are counted per thread and participant.
CREATE INDEX invocations_party ON invocations (thread, round, participant);

-- One row per party trigger: what was selected, and how far the round has
-- gone (stage 1 or 2 while that round runs, 3 once the notice is owed), so
-- that a restarted coordinator moves each round on exactly once.
CREATE TABLE party_rounds (
	trigger_id   TEXT PRIMARY KEY,
	thread       TEXT NOT NULL,
	trigger_seq  INTEGER NOT NULL,
	trigger_gseq INTEGER NOT NULL,
	trigger_from TEXT NOT NULL,
	hop          INTEGER NOT NULL,
	cross_talk   INTEGER NOT NULL,
	selected     TEXT NOT NULL,
	stage        INTEGER NOT NULL,
	created_at   TEXT NOT NULL
);
CREATE INDEX party_rounds_stage ON party_rounds (stage);
