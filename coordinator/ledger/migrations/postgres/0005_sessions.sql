-- CLI sessions (contract 5.6), as in the SQLite migrations/0005_sessions.sql.
CREATE TABLE sessions (
	thread      text NOT NULL,
	participant text NOT NULL,
	client      text NOT NULL,
	session_id  text NOT NULL,
	turns       bigint NOT NULL,
	trigger_seq bigint NOT NULL,
	updated_at  text NOT NULL,
	PRIMARY KEY (thread, participant, client)
);

CREATE TABLE session_resets (
	thread      text NOT NULL,
	participant text NOT NULL,
	seq         bigint NOT NULL,
	PRIMARY KEY (thread, participant)
);

CREATE TABLE last_replies (
	thread      text NOT NULL,
	participant text NOT NULL,
	seq         bigint NOT NULL,
	PRIMARY KEY (thread, participant)
);
