-- Schema version 14 of the bridge's event log on PostgreSQL: the threads'
-- schedules (contract 8.6). See docs/storage.md and the SQLite twin.
CREATE TABLE schedules (
    thread   text COLLATE "C" NOT NULL REFERENCES threads (id),
    id       text COLLATE "C" NOT NULL,
    cron     text NOT NULL,
    tz       text NOT NULL,
    event    text NOT NULL,
    sender   text NOT NULL,
    set_seq  bigint NOT NULL,
    set_at   text NOT NULL,
    last_due text NOT NULL,
    PRIMARY KEY (thread, id)
);
