-- Runs you can watch and stop (contract 5.3, 5.4), as in the SQLite
-- migrations/0003_runs.sql.
CREATE TABLE progress (
	id            bigserial PRIMARY KEY,
	invocation_id bigint NOT NULL,
	ts            text NOT NULL,
	status        text NOT NULL,
	kind          text NOT NULL DEFAULT '',
	detail        text NOT NULL DEFAULT ''
);
CREATE INDEX progress_invocation ON progress (invocation_id, id);

ALTER TABLE invocations ADD COLUMN input_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN output_tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN cost_usd double precision NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN progress_count bigint NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN progress_bad bigint NOT NULL DEFAULT 0;
