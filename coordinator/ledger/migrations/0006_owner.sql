-- Several coordinators on one ledger (contract 7.1): what a coordinator
-- keeps per process (its cursors, decisions, notices, party rounds and CLI
-- sessions) is keyed by its coordinator id, and an invocation records the
-- coordinator that owns it. Rows written before this step get owner '':
-- the first coordinator to open the ledger adopts them (ledger.Open).
-- SQLite cannot change a primary key, so those tables are rebuilt; rowid
-- is copied where queries order by it.
CREATE TABLE cursors_owned (
	owner TEXT NOT NULL,
	name  TEXT NOT NULL,
	value INTEGER NOT NULL,
	PRIMARY KEY (owner, name)
);
INSERT INTO cursors_owned (owner, name, value) SELECT '', name, value FROM cursors;
DROP TABLE cursors;
ALTER TABLE cursors_owned RENAME TO cursors;

CREATE TABLE thread_cursors_owned (
	owner  TEXT NOT NULL,
	thread TEXT NOT NULL,
	seq    INTEGER NOT NULL,
	PRIMARY KEY (owner, thread)
);
INSERT INTO thread_cursors_owned (owner, thread, seq) SELECT '', thread, seq FROM thread_cursors;
DROP TABLE thread_cursors;
ALTER TABLE thread_cursors_owned RENAME TO thread_cursors;

CREATE TABLE decisions_owned (
	owner      TEXT NOT NULL,
	event_id   TEXT NOT NULL,
	thread     TEXT NOT NULL,
	seq        INTEGER NOT NULL,
	gseq       INTEGER NOT NULL,
	decision   TEXT NOT NULL,
	created_at TEXT NOT NULL,
	PRIMARY KEY (owner, event_id)
);
INSERT INTO decisions_owned (rowid, owner, event_id, thread, seq, gseq, decision, created_at)
	SELECT rowid, '', event_id, thread, seq, gseq, decision, created_at FROM decisions;
DROP TABLE decisions;
ALTER TABLE decisions_owned RENAME TO decisions;

CREATE TABLE notices_owned (
	owner           TEXT NOT NULL,
	trigger_id      TEXT NOT NULL,
	kind            TEXT NOT NULL,
	thread          TEXT NOT NULL,
	post            TEXT NOT NULL,
	posted_event_id TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (owner, trigger_id, kind)
);
INSERT INTO notices_owned (rowid, owner, trigger_id, kind, thread, post, posted_event_id)
	SELECT rowid, '', trigger_id, kind, thread, post, posted_event_id FROM notices;
DROP TABLE notices;
ALTER TABLE notices_owned RENAME TO notices;

CREATE TABLE party_rounds_owned (
	owner        TEXT NOT NULL,
	trigger_id   TEXT NOT NULL,
	thread       TEXT NOT NULL,
	trigger_seq  INTEGER NOT NULL,
	trigger_gseq INTEGER NOT NULL,
	trigger_from TEXT NOT NULL,
	hop          INTEGER NOT NULL,
	cross_talk   INTEGER NOT NULL,
	selected     TEXT NOT NULL,
	stage        INTEGER NOT NULL,
	created_at   TEXT NOT NULL,
	PRIMARY KEY (owner, trigger_id)
);
INSERT INTO party_rounds_owned (owner, trigger_id, thread, trigger_seq, trigger_gseq, trigger_from, hop, cross_talk, selected, stage, created_at)
	SELECT '', trigger_id, thread, trigger_seq, trigger_gseq, trigger_from, hop, cross_talk, selected, stage, created_at FROM party_rounds;
DROP TABLE party_rounds;
ALTER TABLE party_rounds_owned RENAME TO party_rounds;
CREATE INDEX party_rounds_stage ON party_rounds (owner, stage);

-- A CLI session lives in one machine's HOME: another coordinator cannot
-- resume it.
CREATE TABLE sessions_owned (
	owner       TEXT NOT NULL,
	thread      TEXT NOT NULL,
	participant TEXT NOT NULL,
	client      TEXT NOT NULL,
	session_id  TEXT NOT NULL,
	turns       INTEGER NOT NULL,
	trigger_seq INTEGER NOT NULL,
	updated_at  TEXT NOT NULL,
	PRIMARY KEY (owner, thread, participant, client)
);
INSERT INTO sessions_owned (owner, thread, participant, client, session_id, turns, trigger_seq, updated_at)
	SELECT '', thread, participant, client, session_id, turns, trigger_seq, updated_at FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_owned RENAME TO sessions;

-- The (trigger, participant, round) pair stays unique across owners: on a
-- shared ledger the first coordinator to queue a pair owns it.
ALTER TABLE invocations ADD COLUMN owner TEXT NOT NULL DEFAULT '';
CREATE INDEX invocations_owner ON invocations (owner, status, id);
