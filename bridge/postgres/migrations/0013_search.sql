-- Schema version 13 of the bridge's event log on PostgreSQL: full-text
-- search (contract 8.6). See docs/storage.md ("Search").

-- The index: one row per event that has text (agentbridge.SearchText). tsv
-- is built by the bridge, not by to_tsvector: the text's tokens
-- (agentbridge.SearchTokens, runs of letters and digits, lowercased, the
-- same as SQLite's) with their positions, weight D, plus one token each for
-- the thread, the sender and the type (a letter and the value in hex),
-- weight A, so that the filters are lexemes of the same GIN index and a
-- query's words, restricted to weight D, never match them.
CREATE TABLE event_search (
    gseq bigint PRIMARY KEY,
    tsv  tsvector NOT NULL
);
CREATE INDEX event_search_tsv ON event_search USING gin (tsv);

-- The migration of the events written before this version: events after
-- target are indexed in their append's transaction; those up to target by
-- the bridge at start, a chunk per transaction that moves done (its row
-- locked, so that two bridges starting at once take turns).
CREATE TABLE search_backfill (
    one    boolean PRIMARY KEY DEFAULT true CHECK (one),
    done   bigint NOT NULL,
    target bigint NOT NULL
);
INSERT INTO search_backfill (done, target) SELECT 0, coalesce(max(gseq), 0) FROM events;
