-- Schema version 18: the idempotency keys a release before scoped keys
-- stored (contract 8.3). Since v4 a key is stored under its sender's
-- principal ("person/KEY", "coordinator:ID/KEY", "<token id>/KEY"); a
-- release before stored the header's value as it came, so a retry spanning
-- the upgrade would find nothing and be stored twice. The keys in no
-- scoped form (nor the bridge's own "claim-expired/…") are copied here,
-- where a person's or a coordinator's retry looks its key up when the
-- scoped one finds nothing. GLOB, unlike LIKE, tells case apart.
CREATE TABLE idempotency_legacy (
    thread   TEXT NOT NULL,
    key      TEXT NOT NULL,
    event_id TEXT NOT NULL,
    PRIMARY KEY (thread, key)
) WITHOUT ROWID;

INSERT INTO idempotency_legacy (thread, key, event_id)
SELECT thread, key, event_id FROM idempotency
WHERE key NOT GLOB 'person/*' AND key NOT GLOB 'coordinator:*/*' AND key NOT GLOB 'claim-expired/*'
  AND NOT (substr(key, 27, 1) = '/' AND substr(key, 1, 26) NOT GLOB '*[^0-9A-Z]*');
