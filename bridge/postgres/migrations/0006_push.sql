-- Schema version 6: Web Push (contract 7.2), as in the SQLite store's
-- 0007.

-- The bridge's VAPID key pair, one row: generated on first use by the first
-- bridge that needs it and kept, so every bridge on this database signs
-- with the same key and a browser's subscription stays valid.
CREATE TABLE push_keys (
    id          integer PRIMARY KEY CHECK (id = 1),
    public_key  text NOT NULL,
    private_key text NOT NULL,
    created_at  text NOT NULL
);

-- One row per browser subscription (token_id: the credential that
-- subscribed, which ties it to a paired device), the device's name and choices (JSON),
-- and its last delivery's outcome.
CREATE TABLE push_subscriptions (
    seq          bigserial PRIMARY KEY,
    endpoint     text COLLATE "C" NOT NULL UNIQUE,
    p256dh       text NOT NULL,
    auth         text NOT NULL,
    device       text NOT NULL,
    categories   text NOT NULL,
    token_id     text NOT NULL DEFAULT '',
    created_at   text NOT NULL,
    last_outcome text NOT NULL DEFAULT '',
    last_at      text NOT NULL DEFAULT ''
);
