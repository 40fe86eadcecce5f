-- Schema version 11: the pairing codes waiting to be used (contract 7.2),
-- by their SHA-256, with the device's name and when the code lapses (ms
-- since the epoch), kept in the store rather than in one bridge's memory.
CREATE TABLE pair_codes (
    hash       BLOB PRIMARY KEY,
    name       TEXT NOT NULL,
    expires_ms INTEGER NOT NULL
) WITHOUT ROWID;
