-- Schema version 18: waiting for a usage limit (contract 8.5), as in the
-- SQLite store's 0019: a waiting claim no coordinator may take before
-- due_ms (milliseconds since the epoch; 0 = at once).
ALTER TABLE claims ADD COLUMN due_ms bigint NOT NULL DEFAULT 0;
