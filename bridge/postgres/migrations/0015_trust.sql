-- Trust between machines (contract 8.3), as in the SQLite store's 0016_trust.sql.
ALTER TABLE claims ADD COLUMN filed_by text NOT NULL DEFAULT '';
ALTER TABLE claims ADD COLUMN fallback_from text NOT NULL DEFAULT '';
CREATE INDEX claims_waiting_by ON claims (filed_by) WHERE state = 'waiting';

CREATE TABLE unserved_notices (
    thread      text COLLATE "C" NOT NULL,
    participant text COLLATE "C" NOT NULL,
    posted_ms   bigint NOT NULL,
    last_claim  bigint NOT NULL,
    PRIMARY KEY (thread, participant)
);

CREATE TABLE coordinator_names (
    coordinator text COLLATE "C" NOT NULL,
    name        text COLLATE "C" NOT NULL,
    PRIMARY KEY (coordinator, name)
);
INSERT INTO coordinator_names (coordinator, name)
    SELECT coordinators.id, a->>'name'
    FROM coordinators, json_array_elements(coordinators.agents::json) AS a
    ON CONFLICT DO NOTHING;

ALTER TABLE tokens ADD COLUMN agents text NOT NULL DEFAULT '';
CREATE INDEX tokens_by_creator ON tokens (created_by, scope);
CREATE INDEX tokens_by_scope ON tokens (scope);
