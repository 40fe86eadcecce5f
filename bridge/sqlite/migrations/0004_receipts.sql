-- Schema version 4: receipts (contract 5.5). The latest receipt of each
-- (thread, event, participant) pair, kept outside the event log: a receipt
-- has no seq and never makes a revision, and a new one replaces the pair's
-- row. See docs/storage.md.
CREATE TABLE receipts (
    thread      TEXT NOT NULL,
    event       TEXT NOT NULL,
    participant TEXT NOT NULL,
    sender      TEXT NOT NULL,
    state       TEXT NOT NULL,
    reason      TEXT NOT NULL DEFAULT '',
    invocation  TEXT NOT NULL DEFAULT '',
    reply       TEXT NOT NULL DEFAULT '',
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (thread, event, participant)
) WITHOUT ROWID;
