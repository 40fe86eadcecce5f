-- Schema version 14: full-text search (contract 8.6). See docs/storage.md
-- ("Search").

-- The index: one row per event that has text (agentbridge.SearchText),
-- whose rowid is the event's gseq. It is contentless: the text is read from
-- events, so the index does not store it twice. body is the text; thread,
-- sender and type each hold one token (a letter and the value in hex), so
-- that a filter is one more doclist for FTS5 to merge rather than a walk
-- over every match. Tokens are runs of letters and digits, lowercased,
-- without folding diacritics: the same as agentbridge.SearchTokens, which
-- the PostgreSQL index and the snippets use.
CREATE VIRTUAL TABLE events_fts USING fts5(
    body, thread, sender, type,
    content = '',
    tokenize = 'unicode61 remove_diacritics 0'
);

-- The migration of the events written before this version: the writer
-- indexes every event after target in its append's transaction; the events
-- up to target are indexed by the store at start, a chunk per transaction
-- that also moves done, so that a stop resumes after the last chunk.
CREATE TABLE search_backfill (
    one    INTEGER PRIMARY KEY CHECK (one = 1),
    done   INTEGER NOT NULL,
    target INTEGER NOT NULL
);
INSERT INTO search_backfill (one, done, target) SELECT 1, 0, coalesce(max(gseq), 0) FROM events;
