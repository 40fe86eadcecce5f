-- Schema version 9: the log's epoch, as in the SQLite store's 0007. See
-- docs/delivery.md ("After a restore").

-- One row, written by the bridge on its first start (epoch.go): a random
-- id, the gseq the log had when the epoch began, and the OID of the events
-- table then. A restore from a dump (pg_dump, then pg_restore or psql)
-- creates the events table anew, with another OID: the next bridge to
-- start sees that and begins a new epoch at the restored log's head, so a
-- coordinator whose cursor went past it in the old log goes back to it.
CREATE TABLE log_epoch (
    one    boolean PRIMARY KEY DEFAULT true CHECK (one),
    id     bigint NOT NULL,
    base   bigint NOT NULL,
    anchor oid NOT NULL
);
