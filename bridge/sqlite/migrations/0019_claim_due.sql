-- Waiting for a usage limit (contract 8.5): a waiting claim no coordinator
-- may take before due_ms (milliseconds since the epoch; 0 = at once), the
-- time the participant's usage limit resets. See docs/storage.md.
ALTER TABLE claims ADD COLUMN due_ms INTEGER NOT NULL DEFAULT 0;
