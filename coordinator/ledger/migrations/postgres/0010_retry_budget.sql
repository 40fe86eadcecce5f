-- The retry budget of each invocation's preparation, as in the SQLite
-- migrations/0010_retry_budget.sql.
ALTER TABLE invocations ADD COLUMN prepare_failures integer NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN prepare_first_ms bigint NOT NULL DEFAULT 0;
