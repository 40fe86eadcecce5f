-- Schema version 3: a thread's head (updated_at, last_seq, event_count) is
-- read from its last event instead of being written with every commit. See
-- docs/storage.md.

-- Every append to a thread rewrote its threads row and moved its entry in
-- threads_by_update: with appends spread over many threads, two or three more
-- dirty pages per group commit. GET /threads now sorts the threads it lists.
DROP INDEX threads_by_update;
ALTER TABLE threads DROP COLUMN updated_at;
ALTER TABLE threads DROP COLUMN last_seq;
ALTER TABLE threads DROP COLUMN event_count;

-- thread_heads: each thread with the seq and ts of its last event, each one
-- seek on events_by_seq. seq is gapless from 1, so the last seq is also the
-- thread's event count. Scalar subqueries rather than a join, so that the
-- planner cannot choose to walk the events table.
CREATE VIEW thread_heads AS
SELECT t.id, t.name, t.created_at,
    (SELECT ts FROM events WHERE thread = t.id ORDER BY seq DESC LIMIT 1) AS updated_at,
    (SELECT max(seq) FROM events WHERE thread = t.id) AS last_seq
FROM threads t;
