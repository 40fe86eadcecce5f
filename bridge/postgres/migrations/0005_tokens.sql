-- Schema version 5: the bridge's credentials (contract 7.3). See
-- docs/security.md.

-- One row per token, in creation order (seq). Only the secret's SHA-256 is
-- kept (hash); thread and participant are the binding ('' for none); the
-- times are TimeLayout strings, '' for a token that does not expire or is
-- not revoked.
CREATE TABLE tokens (
    seq         BIGSERIAL PRIMARY KEY,
    id          TEXT COLLATE "C" NOT NULL UNIQUE,
    hash        BYTEA NOT NULL UNIQUE,
    name        TEXT NOT NULL,
    scope       TEXT NOT NULL,
    thread      TEXT NOT NULL,
    participant TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    revoked_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL
);
