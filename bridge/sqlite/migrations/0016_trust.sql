-- Trust between machines (contract 8.3). See docs/security.md.
--
-- claims.filed_by is the coordinator that filed a waiting claim (at most
-- 1,000 waiting per coordinator); claims.fallback_from the participant a
-- fallback claim answers for (contract 8.5), whose trigger a coordinator
-- taking the claim over decides again.
ALTER TABLE claims ADD COLUMN filed_by TEXT NOT NULL DEFAULT '';
ALTER TABLE claims ADD COLUMN fallback_from TEXT NOT NULL DEFAULT '';
CREATE INDEX claims_waiting_by ON claims (filed_by) WHERE state = 'waiting';

-- The last "nobody served" notice of each (thread, participant): at most
-- one per pending ttl; last_claim is the newest claim it counted, so that
-- the next one counts only those after it.
CREATE TABLE unserved_notices (
    thread      TEXT NOT NULL,
    participant TEXT NOT NULL,
    posted_ms   INTEGER NOT NULL,
    last_claim  INTEGER NOT NULL,
    PRIMARY KEY (thread, participant)
) WITHOUT ROWID;

-- Every agent name each coordinator id ever registered (at most 256).
CREATE TABLE coordinator_names (
    coordinator TEXT NOT NULL,
    name        TEXT NOT NULL,
    PRIMARY KEY (coordinator, name)
) WITHOUT ROWID;
INSERT OR IGNORE INTO coordinator_names (coordinator, name)
    SELECT coordinators.id, json_extract(a.value, '$.name')
    FROM coordinators, json_each(coordinators.agents) AS a;

-- A coordinator token's allow-list of agent names ('' for none), and the
-- count of the live agent tokens each credential made.
ALTER TABLE tokens ADD COLUMN agents TEXT NOT NULL DEFAULT '';
CREATE INDEX tokens_by_creator ON tokens (created_by, scope);
CREATE INDEX tokens_by_scope ON tokens (scope);
