-- Schema version 5: improvement suggestions (POST /suggest). See
-- docs/storage.md.

-- One row per suggestion, in arrival order (seq). They are not events: no
-- thread owns them and no client follows them.
CREATE TABLE suggestions (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    sender      TEXT NOT NULL,
    title       TEXT NOT NULL,
    description TEXT NOT NULL,
    status      TEXT NOT NULL,
    ts          TEXT NOT NULL
);
