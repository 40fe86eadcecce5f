-- Several coordinators on one ledger (contract 7.1), as in the SQLite
-- migrations/0006_owner.sql: what a coordinator keeps per process is keyed
-- by its coordinator id, and an invocation records the coordinator that
-- owns it. Rows written before this step get owner '': the first
-- coordinator to open the ledger adopts them (ledger.Open).
ALTER TABLE cursors ADD COLUMN owner text NOT NULL DEFAULT '';
ALTER TABLE cursors DROP CONSTRAINT cursors_pkey;
ALTER TABLE cursors ADD PRIMARY KEY (owner, name);

ALTER TABLE thread_cursors ADD COLUMN owner text NOT NULL DEFAULT '';
ALTER TABLE thread_cursors DROP CONSTRAINT thread_cursors_pkey;
ALTER TABLE thread_cursors ADD PRIMARY KEY (owner, thread);

ALTER TABLE decisions ADD COLUMN owner text NOT NULL DEFAULT '';
ALTER TABLE decisions DROP CONSTRAINT decisions_pkey;
ALTER TABLE decisions ADD PRIMARY KEY (owner, event_id);

ALTER TABLE notices ADD COLUMN owner text NOT NULL DEFAULT '';
ALTER TABLE notices DROP CONSTRAINT notices_pkey;
ALTER TABLE notices ADD PRIMARY KEY (owner, trigger_id, kind);

ALTER TABLE party_rounds ADD COLUMN owner text NOT NULL DEFAULT '';
ALTER TABLE party_rounds DROP CONSTRAINT party_rounds_pkey;
ALTER TABLE party_rounds ADD PRIMARY KEY (owner, trigger_id);
DROP INDEX party_rounds_stage;
CREATE INDEX party_rounds_stage ON party_rounds (owner, stage);

-- A CLI session lives in one machine's HOME: another coordinator cannot
-- resume it.
ALTER TABLE sessions ADD COLUMN owner text NOT NULL DEFAULT '';
ALTER TABLE sessions DROP CONSTRAINT sessions_pkey;
ALTER TABLE sessions ADD PRIMARY KEY (owner, thread, participant, client);

-- The (trigger, participant, round) pair stays unique across owners: on a
-- shared ledger the first coordinator to queue a pair owns it.
ALTER TABLE invocations ADD COLUMN owner text NOT NULL DEFAULT '';
CREATE INDEX invocations_owner ON invocations (owner, status, id);
