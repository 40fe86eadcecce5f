-- Scene mode (contract 5.8): each actor's journal, as in the SQLite
-- migrations/0002_scene_journals.sql.
CREATE TABLE journals (
	invocation_id bigint PRIMARY KEY,
	participant   text NOT NULL,
	thread        text NOT NULL,
	thread_name   text NOT NULL DEFAULT '',
	created_at    text NOT NULL,
	entry         text NOT NULL
);
CREATE INDEX journals_participant ON journals (participant, invocation_id);
