-- Schema version 8: claims (contract 7.1), as in the SQLite store's 0010:
-- one row per claim key, its state, holder and fencing number, times in
-- milliseconds since the epoch by the database's clock; and every agent
-- name a registration ever listed.
CREATE TABLE claims (
    id                bigserial PRIMARY KEY,
    thread            text COLLATE "C" NOT NULL,
    event             text COLLATE "C" NOT NULL,
    participant       text COLLATE "C" NOT NULL DEFAULT '',
    round             integer NOT NULL DEFAULT 0,
    notice            text COLLATE "C" NOT NULL DEFAULT '',
    client            text NOT NULL DEFAULT '',
    state             text NOT NULL,
    coordinator       text NOT NULL DEFAULT '',
    instance          text NOT NULL DEFAULT '',
    host              text NOT NULL DEFAULT '',
    fence             bigint NOT NULL DEFAULT 0,
    interrupted_fence bigint NOT NULL DEFAULT 0,
    created_ms        bigint NOT NULL,
    claimed_ms        bigint NOT NULL DEFAULT 0,
    expires_ms        bigint NOT NULL DEFAULT 0,
    UNIQUE (thread, event, participant, round, notice)
);
CREATE INDEX claims_open ON claims (state) WHERE state IN ('waiting', 'running');

CREATE TABLE served_agents (
    name   text COLLATE "C" NOT NULL PRIMARY KEY,
    client text NOT NULL DEFAULT ''
);
INSERT INTO served_agents (name, client)
    SELECT DISTINCT ON (a->>'name') a->>'name', coalesce(a->>'client', '')
    FROM coordinators, json_array_elements(coordinators.agents::json) AS a
    ON CONFLICT DO NOTHING;
