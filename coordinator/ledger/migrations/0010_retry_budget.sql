-- The retry budget of each invocation's preparation (contract 8.3): how
-- many attempts to read its context failed, and when the first did
-- (milliseconds since the epoch), so that a restart does not start the
-- budget again and no run retries for ever.
ALTER TABLE invocations ADD COLUMN prepare_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN prepare_first_ms INTEGER NOT NULL DEFAULT 0;
