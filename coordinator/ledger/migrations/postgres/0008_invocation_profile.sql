-- The participant's invited profile on each invocation, as in the SQLite
-- migrations/0008_invocation_profile.sql.
ALTER TABLE invocations ADD COLUMN profile text NOT NULL DEFAULT '';
