-- The participant's invited profile when its invocation was decided, as
-- JSON ('' for a record made before it was kept, or by a take-over), so
-- that the run uses the profile its decision matched without reading the
-- invite again.
ALTER TABLE invocations ADD COLUMN profile TEXT NOT NULL DEFAULT '';
