-- The bridge's claim of each invocation's run, as in the SQLite
-- migrations/0007_claims.sql.
ALTER TABLE invocations ADD COLUMN claim_id bigint NOT NULL DEFAULT 0;
ALTER TABLE invocations ADD COLUMN claim_fence bigint NOT NULL DEFAULT 0;
