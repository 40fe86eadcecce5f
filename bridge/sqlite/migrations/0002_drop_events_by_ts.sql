-- Schema version 2: drop events_by_ts. See docs/storage.md.

-- ts strictly increases with seq within a thread, so since=<ts> finds its
-- first seq by a binary search over events_by_seq point lookups instead;
-- dropping the index saves every append one b-tree insert, on a leaf page
-- of its own thread, and so one dirty page per thread per group commit.
DROP INDEX events_by_ts;
