-- Schema version 10: the pairing codes waiting to be used, as in the SQLite
-- store's 0011, so that a pairing link made through one bridge works
-- through any bridge on the database.
CREATE TABLE pair_codes (
    hash       bytea PRIMARY KEY,
    name       text NOT NULL,
    expires_ms bigint NOT NULL
);
