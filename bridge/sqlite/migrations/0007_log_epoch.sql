-- Schema version 6: the log's epoch. See docs/delivery.md ("After a
-- restore").

-- One row: a random id that restore replaces, and the gseq the log had
-- when this epoch began (a restored backup's head). A client that kept a
-- cursor in another epoch knows that the log after base is not the one it
-- read, and starts again from there.
CREATE TABLE log_epoch (
    one  INTEGER PRIMARY KEY CHECK (one = 1),
    id   INTEGER NOT NULL,
    base INTEGER NOT NULL
);

INSERT INTO log_epoch (one, id, base)
    VALUES (1, abs(random() % 9007199254740991) + 1, (SELECT coalesce(max(gseq), 0) FROM events));
