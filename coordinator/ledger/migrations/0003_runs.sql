-- Runs you can watch and stop (contract 5.3, 5.4): progress records from an
-- adapter's fd 3, usage summed onto the invocation, and its counters. The
-- status "cancelled" needs no column: it is a value of invocations.status.
CREATE TABLE progress (
	id            INTEGER PRIMARY KEY,
	invocation_id INTEGER NOT NULL,
	ts            TEXT NOT NULL,
	status        TEXT NOT NULL,
	kind          TEXT NOT NULL DEFAULT '',
	detail        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX progress_invocation ON progress (invocation_id, id);

ALTER TABLE invocations ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN progress_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN progress_bad INTEGER NOT NULL DEFAULT 0;
