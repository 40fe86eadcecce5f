-- Why a run failed (contract 8.5): its failure class ('' for a run that did
-- not fail), when the agent's service said it would take requests again
-- ('' when it did not say), the fallback the trigger was handed to, and,
-- on a fallback's own run, the participant that handed it over.
ALTER TABLE invocations ADD COLUMN failure_class TEXT NOT NULL DEFAULT '';
ALTER TABLE invocations ADD COLUMN retry_at TEXT NOT NULL DEFAULT '';
ALTER TABLE invocations ADD COLUMN handed_to TEXT NOT NULL DEFAULT '';
ALTER TABLE invocations ADD COLUMN fallback_from TEXT NOT NULL DEFAULT '';
