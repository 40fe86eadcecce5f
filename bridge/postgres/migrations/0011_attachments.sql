-- Schema version 11: attachments (contract 8.2), as in the SQLite store's
-- 0012. The chunks' bytes are stored out of line and uncompressed
-- (STORAGE EXTERNAL): most attachments are images, already compressed,
-- which pglz would spend time on for nothing. See docs/storage.md.
CREATE TABLE attachments (
    id          text COLLATE "C" PRIMARY KEY,
    name        text NOT NULL,
    type        text NOT NULL,
    size        bigint NOT NULL,
    created_ms  bigint NOT NULL,
    uploaded_ms bigint NOT NULL
);
CREATE INDEX attachments_by_upload ON attachments (uploaded_ms);

CREATE TABLE attachment_chunks (
    attachment text COLLATE "C" NOT NULL,
    n          integer NOT NULL,
    data       bytea NOT NULL,
    PRIMARY KEY (attachment, n)
);
ALTER TABLE attachment_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE TABLE attachment_links (
    attachment text COLLATE "C" NOT NULL,
    thread     text COLLATE "C" NOT NULL,
    event      text COLLATE "C" NOT NULL DEFAULT '',
    PRIMARY KEY (attachment, thread, event)
);
