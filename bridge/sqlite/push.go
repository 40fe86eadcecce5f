package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// The push statements (see agentbridge.PushStore). Writes go through the
// writer, the one connection that writes, as side requests.
const (
	pushKeysInsert = `INSERT INTO push_keys (id, public_key, private_key, created_at) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO NOTHING`
	pushKeysSelect = `SELECT public_key, private_key FROM push_keys WHERE id = 1`
	pushSubPut     = `INSERT INTO push_subscriptions (endpoint, p256dh, auth, device, categories, token_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (endpoint) DO UPDATE SET p256dh = excluded.p256dh, auth = excluded.auth, device = excluded.device, categories = excluded.categories, token_id = excluded.token_id`
	pushSubSelect  = `SELECT ` + storecore.PushSubscriptionColumns + ` FROM push_subscriptions ORDER BY seq`
	pushSubDelete  = `DELETE FROM push_subscriptions WHERE endpoint = ?`
	pushSubByToken = `DELETE FROM push_subscriptions WHERE token_id = ?`
	pushSubOutcome = `UPDATE push_subscriptions SET last_outcome = ?, last_at = ? WHERE endpoint = ?`
	pushSubExists  = `SELECT count(*) FROM push_subscriptions WHERE endpoint = ?`
	pushSubCounts  = `SELECT count(*), coalesce(sum(` + storecore.PushCapKeySQL + ` = ?), 0) FROM push_subscriptions`
	pushDelInsert  = `INSERT INTO push_deliveries (device_key, ` + storecore.PushDeliveryColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// The newest MaxPushDeliveries of the device, and MaxPushDeliveriesKept
	// in all, are kept.
	pushDelPrune = `DELETE FROM push_deliveries WHERE device_key = ? AND seq <= coalesce(
		(SELECT seq FROM push_deliveries WHERE device_key = ? ORDER BY seq DESC LIMIT 1 OFFSET ?), 0)`
	pushDelPruneAll = `DELETE FROM push_deliveries WHERE seq <= coalesce(
		(SELECT seq FROM push_deliveries ORDER BY seq DESC LIMIT 1 OFFSET ?), 0)`
)

// side runs fn on the writer's connection inside a group commit.
func (s *Store) side(ctx context.Context, fn func(ctx context.Context, conn *sql.Conn) error) error {
	r := s.newRequest(ctx)
	r.side = fn
	return s.submit(ctx, r).err
}

// PushKeys returns the stored VAPID keys, storing candidate when there are
// none.
func (s *Store) PushKeys(ctx context.Context, candidate agentbridge.PushKeys) (_ agentbridge.PushKeys, err error) {
	defer s.guard(time.Now(), &err)
	var k agentbridge.PushKeys
	err = s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
		if _, err := conn.ExecContext(ctx, pushKeysInsert, candidate.Public, candidate.Private, agentbridge.FormatTime(time.Now())); err != nil {
			return fmt.Errorf("store push keys: %w", err)
		}
		if err := conn.QueryRowContext(ctx, pushKeysSelect).Scan(&k.Public, &k.Private); err != nil {
			return fmt.Errorf("read push keys: %w", err)
		}
		return nil
	})
	return k, err
}

// PutPushSubscription stores sub, replacing the one with its endpoint;
// a new endpoint past limits is refused. The writer runs one side request
// at a time, so the count and the insert are one step.
func (s *Store) PutPushSubscription(ctx context.Context, sub agentbridge.PushSubscription, limits agentbridge.PushLimits) (err error) {
	defer s.guard(time.Now(), &err)
	cats, err := json.Marshal(sub.Categories)
	if err != nil {
		return fmt.Errorf("encode push categories: %w", err)
	}
	var refusal error
	err = s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
		var exists, total, mine int
		if err := conn.QueryRowContext(ctx, pushSubExists, sub.Endpoint).Scan(&exists); err != nil {
			return fmt.Errorf("look up push subscription: %w", err)
		}
		if exists == 0 {
			if err := conn.QueryRowContext(ctx, pushSubCounts, agentbridge.PushCapKey(sub.TokenID, sub.Device)).Scan(&total, &mine); err != nil {
				return fmt.Errorf("count push subscriptions: %w", err)
			}
			if refusal = limits.Check(mine, total); refusal != nil {
				return nil
			}
		}
		if _, err := conn.ExecContext(ctx, pushSubPut, sub.Endpoint, sub.P256dh, sub.Auth, sub.Device, string(cats), sub.TokenID, agentbridge.FormatTime(time.Now())); err != nil {
			return fmt.Errorf("store push subscription: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return refusal
}

// PushSubscriptions lists the subscriptions, oldest first.
func (s *Store) PushSubscriptions(ctx context.Context) (_ []agentbridge.PushSubscription, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.rdb.QueryContext(ctx, pushSubSelect)
	if err != nil {
		return nil, fmt.Errorf("list push subscriptions: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "push subscriptions", storecore.ScanPushSubscription)
}

// DeletePushSubscription removes endpoint's subscription.
func (s *Store) DeletePushSubscription(ctx context.Context, endpoint string) (found bool, err error) {
	defer s.guard(time.Now(), &err)
	err = s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
		res, err := conn.ExecContext(ctx, pushSubDelete, endpoint)
		if err != nil {
			return fmt.Errorf("delete push subscription: %w", err)
		}
		n, err := res.RowsAffected()
		found = n > 0
		return err
	})
	return found, err
}

// DeleteTokenPushSubscriptions removes the subscriptions made with token
// id.
func (s *Store) DeleteTokenPushSubscriptions(ctx context.Context, tokenID string) (err error) {
	defer s.guard(time.Now(), &err)
	return s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
		if _, err := conn.ExecContext(ctx, pushSubByToken, tokenID); err != nil {
			return fmt.Errorf("delete a token's push subscriptions: %w", err)
		}
		return nil
	})
}

// RecordPushDelivery keeps d and makes it its subscription's last outcome.
func (s *Store) RecordPushDelivery(ctx context.Context, d agentbridge.PushDelivery) (err error) {
	defer s.guard(time.Now(), &err)
	return s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
		if _, err := conn.ExecContext(ctx, pushSubOutcome, d.Outcome, d.At, d.Endpoint); err != nil {
			return fmt.Errorf("record push outcome: %w", err)
		}
		if _, err := conn.ExecContext(ctx, pushDelInsert, storecore.PushDeliveryValues(d)...); err != nil {
			return fmt.Errorf("record push delivery: %w", err)
		}
		if _, err := conn.ExecContext(ctx, pushDelPrune, d.DeviceKey(), d.DeviceKey(), agentbridge.MaxPushDeliveries); err != nil {
			return fmt.Errorf("prune push deliveries: %w", err)
		}
		if _, err := conn.ExecContext(ctx, pushDelPruneAll, agentbridge.MaxPushDeliveriesKept); err != nil {
			return fmt.Errorf("prune push deliveries: %w", err)
		}
		return nil
	})
}

// PushDeliveries lists the kept deliveries, newest first.
func (s *Store) PushDeliveries(ctx context.Context) (_ []agentbridge.PushDelivery, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.rdb.QueryContext(ctx, storecore.PushDeliveriesSelect)
	if err != nil {
		return nil, fmt.Errorf("list push deliveries: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "push deliveries", storecore.ScanPushDelivery)
}

var _ agentbridge.PushStore = (*Store)(nil)
