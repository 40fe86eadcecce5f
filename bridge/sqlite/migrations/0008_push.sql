-- Schema version 7: Web Push (contract 7.2). See docs/storage.md.

-- The bridge's VAPID key pair, one row: generated on first use and kept,
-- so a browser's subscription stays valid across restarts.
CREATE TABLE push_keys (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    public_key  TEXT NOT NULL,
    private_key TEXT NOT NULL,
    created_at  TEXT NOT NULL
);

-- One row per browser subscription (token_id: the credential that
-- subscribed, which ties it to a paired device) (the Push API's endpoint and keys), the
-- device's name and choices (JSON), and its last delivery's outcome.
CREATE TABLE push_subscriptions (
    seq          INTEGER PRIMARY KEY,
    endpoint     TEXT NOT NULL UNIQUE,
    p256dh       TEXT NOT NULL,
    auth         TEXT NOT NULL,
    device       TEXT NOT NULL,
    categories   TEXT NOT NULL,
    token_id     TEXT NOT NULL DEFAULT '',
    created_at   TEXT NOT NULL,
    last_outcome TEXT NOT NULL DEFAULT '',
    last_at      TEXT NOT NULL DEFAULT ''
);
