-- Schema version 3: improvement suggestions (POST /suggest), as in the
-- SQLite store's 0005. They are not events: no thread owns them and no
-- client follows them; seq keeps their arrival order.
CREATE TABLE suggestions (
    seq         bigserial PRIMARY KEY,
    id          text COLLATE "C" NOT NULL UNIQUE,
    sender      text NOT NULL,
    title       text NOT NULL,
    description text NOT NULL,
    status      text NOT NULL,
    ts          text NOT NULL
);
