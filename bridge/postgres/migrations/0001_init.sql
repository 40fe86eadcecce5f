-- Schema version 1 of the bridge's event log on PostgreSQL. See
-- docs/storage.md ("PostgreSQL").

-- One row per thread, with its head: name is bytes (UTF-8), since
-- a name may hold a NUL, which text refuses. The writer locks the row (FOR UPDATE)
-- for every append, so seq and ts are decided by one writer at a time per
-- thread, whichever bridge process it runs in. state is the derived state
-- without last_hop; updated_at is the ts of the last event.
CREATE TABLE threads (
    id         text COLLATE "C" PRIMARY KEY,
    name       bytea NOT NULL,
    created_at text NOT NULL,
    updated_at text COLLATE "C" NOT NULL,
    last_seq   bigint NOT NULL,
    last_hop   integer NOT NULL,
    state      text NOT NULL
);

-- Keyset paging of GET /threads: most recently updated first.
CREATE INDEX threads_by_update ON threads (updated_at DESC, id DESC);

-- The log head: the last gseq handed out. Every commit takes this row's
-- lock last and keeps it until COMMIT, so gseq order is commit order.
CREATE TABLE log_head (
    one  boolean PRIMARY KEY DEFAULT true CHECK (one),
    gseq bigint NOT NULL
);
INSERT INTO log_head (gseq) VALUES (0);

-- The append-only log. content is the raw JSON as bytes (bytea, so that
-- whatever a client sent round-trips exactly); hop is the thread's
-- last_hop after the event, so the state as of any seq needs no scan.
CREATE TABLE events (
    gseq      bigint PRIMARY KEY,
    id        text NOT NULL UNIQUE,
    thread    text COLLATE "C" NOT NULL REFERENCES threads (id),
    seq       bigint NOT NULL,
    ts        text COLLATE "C" NOT NULL,
    type      text NOT NULL,
    sender    text NOT NULL,
    recipient text NOT NULL,
    content   bytea,
    meta      text NOT NULL,
    hop       integer NOT NULL,
    UNIQUE (thread, seq)
);

-- since=<ts> finds its first event by this index. Text columns that are
-- compared or sorted use the C collation: byte order, as in SQLite and as
-- v0 clients compare ts strings, whatever the database's default.
CREATE INDEX events_by_ts ON events (thread, ts);

-- The derived state (without last_hop) as of each seq where it changed.
CREATE TABLE state_snapshots (
    thread text COLLATE "C" NOT NULL REFERENCES threads (id),
    seq    bigint NOT NULL,
    state  text NOT NULL,
    PRIMARY KEY (thread, seq)
);

-- Idempotency keys (bytes: a key is any header value).
CREATE TABLE idempotency (
    thread   text COLLATE "C" NOT NULL REFERENCES threads (id),
    key      bytea NOT NULL,
    event_id text NOT NULL,
    PRIMARY KEY (thread, key)
);
