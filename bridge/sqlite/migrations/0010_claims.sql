-- Claims (contract 7.1): one row per claim key (a run: thread, event,
-- participant, round; or a notice: thread, event, notice), its state, its
-- holder and fencing number; times are milliseconds since the epoch by the
-- database's clock. interrupted_fence is the fence the sweeper last wrote
-- the interrupted receipt at, so that it writes it once per fence.
-- served_agents keeps every agent name a registration ever listed. See
-- docs/storage.md.
CREATE TABLE claims (
    id                INTEGER PRIMARY KEY,
    thread            TEXT NOT NULL,
    event             TEXT NOT NULL,
    participant       TEXT NOT NULL DEFAULT '',
    round             INTEGER NOT NULL DEFAULT 0,
    notice            TEXT NOT NULL DEFAULT '',
    client            TEXT NOT NULL DEFAULT '',
    state             TEXT NOT NULL,
    coordinator       TEXT NOT NULL DEFAULT '',
    instance          TEXT NOT NULL DEFAULT '',
    host              TEXT NOT NULL DEFAULT '',
    fence             INTEGER NOT NULL DEFAULT 0,
    interrupted_fence INTEGER NOT NULL DEFAULT 0,
    created_ms        INTEGER NOT NULL,
    claimed_ms        INTEGER NOT NULL DEFAULT 0,
    expires_ms        INTEGER NOT NULL DEFAULT 0,
    UNIQUE (thread, event, participant, round, notice)
);
-- The sweeper's and Claimable's scan: only the claims still open.
CREATE INDEX claims_open ON claims (state) WHERE state IN ('waiting', 'running');

CREATE TABLE served_agents (
    name   TEXT NOT NULL PRIMARY KEY,
    client TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
INSERT OR IGNORE INTO served_agents (name, client)
    SELECT json_extract(a.value, '$.name'), coalesce(json_extract(a.value, '$.client'), '')
    FROM coordinators, json_each(coordinators.agents) AS a;
