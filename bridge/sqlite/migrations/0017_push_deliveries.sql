-- Schema version 17: each push's outcome (contract 8.4), kept per device
-- (device_key: the credential that subscribed, else the endpoint), the
-- newest 100 of each; outcome is "sent", "expired" or "failed: …", status
-- the push service's HTTP status (0: no answer).
CREATE TABLE push_deliveries (
    seq        INTEGER PRIMARY KEY,
    device_key TEXT NOT NULL,
    endpoint   TEXT NOT NULL,
    token_id   TEXT NOT NULL DEFAULT '',
    device     TEXT NOT NULL,
    thread     TEXT NOT NULL,
    event      TEXT NOT NULL,
    category   TEXT NOT NULL,
    outcome    TEXT NOT NULL,
    status     INTEGER NOT NULL DEFAULT 0,
    at         TEXT NOT NULL,
    latency_ms INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX push_deliveries_by_device ON push_deliveries (device_key, seq);
