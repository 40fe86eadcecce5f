-- Schema version 1 of the bridge's event log. See docs/storage.md.

-- One row per thread. updated_at is the ts of the thread's last event;
-- last_seq and event_count are maintained by the writer on every append.
CREATE TABLE threads (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    last_seq    INTEGER NOT NULL,
    event_count INTEGER NOT NULL
) WITHOUT ROWID;

-- Keyset paging of GET /threads: most recently updated first.
CREATE INDEX threads_by_update ON threads (updated_at, id);

-- The append-only log. gseq is the rowid: one writer commits in order, so
-- gseq order is commit order. hop is the thread's last_hop after the event,
-- so the state as of any seq needs no scan.
CREATE TABLE events (
    gseq      INTEGER PRIMARY KEY,
    id        TEXT NOT NULL,
    thread    TEXT NOT NULL REFERENCES threads (id),
    seq       INTEGER NOT NULL,
    ts        TEXT NOT NULL,
    type      TEXT NOT NULL,
    sender    TEXT NOT NULL,
    recipient TEXT NOT NULL,
    content   TEXT,
    meta      TEXT NOT NULL,
    hop       INTEGER NOT NULL
);

CREATE UNIQUE INDEX events_by_id ON events (id);
CREATE UNIQUE INDEX events_by_seq ON events (thread, seq);
CREATE INDEX events_by_ts ON events (thread, ts);

-- The current derived state of each thread (without last_hop, which lives
-- in events.hop), updated in the same transaction as every append.
CREATE TABLE thread_state (
    thread   TEXT PRIMARY KEY REFERENCES threads (id),
    seq      INTEGER NOT NULL,
    last_hop INTEGER NOT NULL,
    state    TEXT NOT NULL
) WITHOUT ROWID;

-- The derived state (without last_hop) as of each seq where it changed; the
-- state at revision N is the row with the greatest seq <= N.
CREATE TABLE state_snapshots (
    thread TEXT NOT NULL REFERENCES threads (id),
    seq    INTEGER NOT NULL,
    state  TEXT NOT NULL,
    PRIMARY KEY (thread, seq)
) WITHOUT ROWID;

-- Idempotency keys: a retry with the same key in the same thread returns
-- the first event.
CREATE TABLE idempotency (
    thread   TEXT NOT NULL REFERENCES threads (id),
    key      TEXT NOT NULL,
    event_id TEXT NOT NULL,
    PRIMARY KEY (thread, key)
) WITHOUT ROWID;
