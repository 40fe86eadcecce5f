-- Schema version 17: the idempotency keys a release before scoped keys
-- stored, as in the SQLite store's 0018 (keys are bytea here).
CREATE TABLE idempotency_legacy (
    thread   text COLLATE "C" NOT NULL,
    key      bytea NOT NULL,
    event_id text NOT NULL,
    PRIMARY KEY (thread, key)
);

INSERT INTO idempotency_legacy (thread, key, event_id)
SELECT thread, key, event_id FROM idempotency
WHERE NOT (
       position('person/'::bytea IN key) = 1
    OR (position('coordinator:'::bytea IN key) = 1 AND position('/'::bytea IN substring(key FROM 13)) > 0)
    OR position('claim-expired/'::bytea IN key) = 1
    OR (substring(key FROM 27 FOR 1) = '/'::bytea AND encode(substring(key FROM 1 FOR 26), 'escape') ~ '^[0-9A-Z]{26}$'));
