-- Why a run failed, its fallback and where it came from, as in the SQLite
-- migrations/0011_failure.sql.
ALTER TABLE invocations ADD COLUMN failure_class text NOT NULL DEFAULT '';
ALTER TABLE invocations ADD COLUMN retry_at text NOT NULL DEFAULT '';
ALTER TABLE invocations ADD COLUMN handed_to text NOT NULL DEFAULT '';
ALTER TABLE invocations ADD COLUMN fallback_from text NOT NULL DEFAULT '';
