-- Schema version 6: coordinator registrations (contract 7.1). One row per
-- coordinator id: what it serves (agents as JSON), which process holds the
-- id (instance), and its heartbeat in milliseconds since the epoch by the
-- database's clock. See docs/storage.md.
CREATE TABLE coordinators (
    id            TEXT NOT NULL PRIMARY KEY,
    instance      TEXT NOT NULL,
    host          TEXT NOT NULL,
    agents        TEXT NOT NULL,
    version       TEXT NOT NULL DEFAULT '',
    capacity      INTEGER NOT NULL DEFAULT 0,
    status_url    TEXT NOT NULL DEFAULT '',
    ttl_ms        INTEGER NOT NULL,
    registered_ms INTEGER NOT NULL,
    heartbeat_ms  INTEGER NOT NULL
) WITHOUT ROWID;
