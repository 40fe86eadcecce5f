-- CLI sessions per (thread, participant, client) (contract 5.6): the last
-- session id an adapter reported on its progress fd and how many runs used
-- it. trigger_seq is the trigger of the run that last reported it, so that
-- a reset only forgets sessions reported for earlier triggers.
CREATE TABLE sessions (
	thread      TEXT NOT NULL,
	participant TEXT NOT NULL,
	client      TEXT NOT NULL,
	session_id  TEXT NOT NULL,
	turns       INTEGER NOT NULL,
	trigger_seq INTEGER NOT NULL,
	updated_at  TEXT NOT NULL,
	PRIMARY KEY (thread, participant, client)
);

-- The latest reset_session control per (thread, participant): a run for an
-- earlier trigger that finishes after the reset does not bring its session
-- back.
CREATE TABLE session_resets (
	thread      TEXT NOT NULL,
	participant TEXT NOT NULL,
	seq         INTEGER NOT NULL,
	PRIMARY KEY (thread, participant)
);

-- The seq of each participant's latest reply the coordinator posted, so
-- that since_last_turn is read from there instead of a fixed span.
CREATE TABLE last_replies (
	thread      TEXT NOT NULL,
	participant TEXT NOT NULL,
	seq         INTEGER NOT NULL,
	PRIMARY KEY (thread, participant)
);
