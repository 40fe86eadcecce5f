-- Schema version 12: attachments (contract 8.2). One row per stored file,
-- by the SHA-256 of its bytes: its sniffed type, size, the name of its
-- first upload, and the time of its last upload (ms since the epoch),
-- which starts the sweep's 24 hours again. The bytes are chunks of at most
-- 1 MiB, read one at a time by a download. attachment_links says which
-- threads hold a file: event '' for an upload to the thread, else the id
-- of an event that names it; a file no event names is swept 24 h after
-- its last upload. See docs/storage.md.
CREATE TABLE attachments (
    id          TEXT NOT NULL PRIMARY KEY,
    name        TEXT NOT NULL,
    type        TEXT NOT NULL,
    size        INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL,
    uploaded_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX attachments_by_upload ON attachments (uploaded_ms);

CREATE TABLE attachment_chunks (
    attachment TEXT NOT NULL,
    n          INTEGER NOT NULL,
    data       BLOB NOT NULL,
    PRIMARY KEY (attachment, n)
);

CREATE TABLE attachment_links (
    attachment TEXT NOT NULL,
    thread     TEXT NOT NULL,
    event      TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (attachment, thread, event)
) WITHOUT ROWID;
