-- Scene mode (contract 5.8): each actor's journal, one row per journal
-- entry, keyed by the invocation that wrote it so that a re-posted outcome
-- never appends twice. A participant's journal is its rows in order.
CREATE TABLE journals (
	invocation_id INTEGER PRIMARY KEY,
	participant   TEXT NOT NULL,
	thread        TEXT NOT NULL,
	thread_name   TEXT NOT NULL DEFAULT '',
	created_at    TEXT NOT NULL,
	entry         TEXT NOT NULL
);
CREATE INDEX journals_participant ON journals (participant, invocation_id);
