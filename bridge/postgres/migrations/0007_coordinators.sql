-- Schema version 5: coordinator registrations (contract 7.1), as in the
-- SQLite store's 0006: one row per coordinator id, its heartbeat in
-- milliseconds since the epoch by the database's clock.
CREATE TABLE coordinators (
    id            text COLLATE "C" NOT NULL PRIMARY KEY,
    instance      text NOT NULL,
    host          text NOT NULL,
    agents        text NOT NULL,
    version       text NOT NULL DEFAULT '',
    capacity      integer NOT NULL DEFAULT 0,
    status_url    text NOT NULL DEFAULT '',
    ttl_ms        bigint NOT NULL,
    registered_ms bigint NOT NULL,
    heartbeat_ms  bigint NOT NULL
);
