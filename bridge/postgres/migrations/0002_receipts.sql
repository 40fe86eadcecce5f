-- Schema version 2: receipts (contract 5.5), as in the SQLite store's
-- 0004: the latest receipt of each (thread, event, participant), outside
-- the event log.
CREATE TABLE receipts (
    thread      text COLLATE "C" NOT NULL REFERENCES threads (id),
    event       text COLLATE "C" NOT NULL,
    participant text COLLATE "C" NOT NULL,
    sender      text NOT NULL,
    state       text NOT NULL,
    reason      text NOT NULL DEFAULT '',
    invocation  text NOT NULL DEFAULT '',
    reply       text NOT NULL DEFAULT '',
    updated_at  text NOT NULL,
    PRIMARY KEY (thread, event, participant)
);
