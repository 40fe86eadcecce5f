-- Schema version 15: the threads' schedules (contract 8.6). See
-- docs/storage.md.

-- One row per schedule a person set with a schedule control, written in the
-- control's append; removed by its "off". last_due is the last due time
-- handled (posted, or skipped with a notice), '' before the first: a post
-- moves it from the value its scheduler read, in the post's own
-- transaction, so a due time is posted once.
CREATE TABLE schedules (
    thread   TEXT NOT NULL REFERENCES threads (id),
    id       TEXT NOT NULL,
    cron     TEXT NOT NULL,
    tz       TEXT NOT NULL,
    event    TEXT NOT NULL,
    sender   TEXT NOT NULL,
    set_seq  INTEGER NOT NULL,
    set_at   TEXT NOT NULL,
    last_due TEXT NOT NULL,
    PRIMARY KEY (thread, id)
) WITHOUT ROWID;
