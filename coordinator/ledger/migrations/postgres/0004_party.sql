-- Party mode (contract 5.7), as in the SQLite migrations/0004_party.sql:
-- an invocation is one (trigger, participant, round); PostgreSQL changes
-- the UNIQUE constraint in place.
ALTER TABLE invocations ADD COLUMN round bigint NOT NULL DEFAULT 0;
ALTER TABLE invocations DROP CONSTRAINT invocations_trigger_id_participant_key;
ALTER TABLE invocations ADD CONSTRAINT invocations_trigger_participant_round UNIQUE (trigger_id, participant, round);
-- Party turns are counted per thread and participant.
CREATE INDEX invocations_party ON invocations (thread, round, participant);

CREATE TABLE party_rounds (
	trigger_id   text PRIMARY KEY,
	thread       text NOT NULL,
	trigger_seq  bigint NOT NULL,
	trigger_gseq bigint NOT NULL,
	trigger_from text NOT NULL,
	hop          bigint NOT NULL,
	cross_talk   boolean NOT NULL, -- SQLite: INTEGER 0/1; both scan into a Go bool
	selected     text NOT NULL,
	stage        bigint NOT NULL,
	created_at   text NOT NULL
);
CREATE INDEX party_rounds_stage ON party_rounds (stage);
