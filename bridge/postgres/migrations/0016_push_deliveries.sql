-- Schema version 16: each push's outcome, as in the SQLite store's 0017.
CREATE TABLE push_deliveries (
    seq        bigserial PRIMARY KEY,
    device_key text COLLATE "C" NOT NULL,
    endpoint   text NOT NULL,
    token_id   text NOT NULL DEFAULT '',
    device     text NOT NULL,
    thread     text NOT NULL,
    event      text NOT NULL,
    category   text NOT NULL,
    outcome    text NOT NULL,
    status     integer NOT NULL DEFAULT 0,
    at         text NOT NULL,
    latency_ms bigint NOT NULL DEFAULT 0
);
CREATE INDEX push_deliveries_by_device ON push_deliveries (device_key, seq);
