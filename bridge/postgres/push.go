package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
	"github.com/jackc/pgx/v5"
)

// The push writes (see agentbridge.PushStore) are not events (no gseq), so
// like suggestions they skip the writer: each is one statement.

// PushKeys returns the stored VAPID keys, storing candidate when there are
// none; of several bridges on one database the first insert wins and all
// read the same row.
func (s *Store) PushKeys(ctx context.Context, candidate agentbridge.PushKeys) (_ agentbridge.PushKeys, err error) {
	defer s.guard(time.Now(), &err)
	if _, err := s.pool.Exec(ctx, `INSERT INTO push_keys (id, public_key, private_key, created_at) VALUES (1, $1, $2, $3) ON CONFLICT (id) DO NOTHING`,
		candidate.Public, candidate.Private, agentbridge.FormatTime(time.Now())); err != nil {
		return agentbridge.PushKeys{}, fmt.Errorf("store push keys: %w", err)
	}
	var k agentbridge.PushKeys
	if err := s.pool.QueryRow(ctx, `SELECT public_key, private_key FROM push_keys WHERE id = 1`).Scan(&k.Public, &k.Private); err != nil {
		return agentbridge.PushKeys{}, fmt.Errorf("read push keys: %w", err)
	}
	return k, nil
}

// pushLock is the transaction lock (pg_advisory_xact_lock) that makes
// counting the subscriptions and inserting one a single step across the
// bridges on the database.
const pushLock = 0x6162707573680001

// PutPushSubscription stores sub, replacing the one with its endpoint; a
// new endpoint past limits is refused.
func (s *Store) PutPushSubscription(ctx context.Context, sub agentbridge.PushSubscription, limits agentbridge.PushLimits) (err error) {
	defer s.guard(time.Now(), &err)
	cats, err := json.Marshal(sub.Categories)
	if err != nil {
		return fmt.Errorf("encode push categories: %w", err)
	}
	var refusal error
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		refusal = nil
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT pg_advisory_xact_lock($1), EXISTS (SELECT 1 FROM push_subscriptions WHERE endpoint = $2)`,
			int64(pushLock), sub.Endpoint).Scan(nil, &exists); err != nil {
			return fmt.Errorf("look up push subscription: %w", err)
		}
		if !exists {
			var total, mine int
			if err := tx.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE `+storecore.PushCapKeySQL+` = $1) FROM push_subscriptions`,
				agentbridge.PushCapKey(sub.TokenID, sub.Device)).Scan(&total, &mine); err != nil {
				return fmt.Errorf("count push subscriptions: %w", err)
			}
			if refusal = limits.Check(mine, total); refusal != nil {
				return nil
			}
		}
		return putPushSubscription(ctx, tx, sub, string(cats))
	})
	if err != nil {
		return err
	}
	return refusal
}

// putPushSubscription inserts or replaces sub in tx.
func putPushSubscription(ctx context.Context, tx pgx.Tx, sub agentbridge.PushSubscription, cats string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO push_subscriptions (endpoint, p256dh, auth, device, categories, token_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (endpoint) DO UPDATE SET p256dh = excluded.p256dh, auth = excluded.auth, device = excluded.device, categories = excluded.categories, token_id = excluded.token_id`,
		sub.Endpoint, sub.P256dh, sub.Auth, sub.Device, cats, sub.TokenID, agentbridge.FormatTime(time.Now())); err != nil {
		return fmt.Errorf("store push subscription: %w", err)
	}
	return nil
}

// PushSubscriptions lists the subscriptions, oldest first.
func (s *Store) PushSubscriptions(ctx context.Context) (_ []agentbridge.PushSubscription, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.pool.Query(ctx, `SELECT `+storecore.PushSubscriptionColumns+` FROM push_subscriptions ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("list push subscriptions: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "push subscriptions", storecore.ScanPushSubscription)
}

// DeletePushSubscription removes endpoint's subscription.
func (s *Store) DeletePushSubscription(ctx context.Context, endpoint string) (_ bool, err error) {
	defer s.guard(time.Now(), &err)
	tag, err := s.pool.Exec(ctx, `DELETE FROM push_subscriptions WHERE endpoint = $1`, endpoint)
	if err != nil {
		return false, fmt.Errorf("delete push subscription: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// DeleteTokenPushSubscriptions removes the subscriptions made with token
// id.
func (s *Store) DeleteTokenPushSubscriptions(ctx context.Context, tokenID string) (err error) {
	defer s.guard(time.Now(), &err)
	if _, err := s.pool.Exec(ctx, `DELETE FROM push_subscriptions WHERE token_id = $1`, tokenID); err != nil {
		return fmt.Errorf("delete a token's push subscriptions: %w", err)
	}
	return nil
}

// RecordPushDelivery keeps d and makes it its subscription's last
// outcome, in one round trip.
func (s *Store) RecordPushDelivery(ctx context.Context, d agentbridge.PushDelivery) (err error) {
	defer s.guard(time.Now(), &err)
	var b pgx.Batch
	b.Queue(`UPDATE push_subscriptions SET last_outcome = $1, last_at = $2 WHERE endpoint = $3`, d.Outcome, d.At, d.Endpoint)
	b.Queue(`INSERT INTO push_deliveries (device_key, `+storecore.PushDeliveryColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		storecore.PushDeliveryValues(d)...)
	// The newest MaxPushDeliveries of the device, and MaxPushDeliveriesKept
	// in all, are kept.
	b.Queue(`DELETE FROM push_deliveries WHERE device_key = $1 AND seq <= coalesce(
		(SELECT seq FROM push_deliveries WHERE device_key = $1 ORDER BY seq DESC LIMIT 1 OFFSET $2), 0)`, d.DeviceKey(), agentbridge.MaxPushDeliveries)
	b.Queue(`DELETE FROM push_deliveries WHERE seq <= coalesce(
		(SELECT seq FROM push_deliveries ORDER BY seq DESC LIMIT 1 OFFSET $1), 0)`, agentbridge.MaxPushDeliveriesKept)
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("record push delivery: %w", err)
	}
	return nil
}

// PushDeliveries lists the kept deliveries, newest first.
func (s *Store) PushDeliveries(ctx context.Context) (_ []agentbridge.PushDelivery, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.pool.Query(ctx, storecore.PushDeliveriesSelect)
	if err != nil {
		return nil, fmt.Errorf("list push deliveries: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "push deliveries", storecore.ScanPushDelivery)
}

var _ agentbridge.PushStore = (*Store)(nil)
