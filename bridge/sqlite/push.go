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

// PutPushSubscription stores sub, replacing the one with its endpoint.
func (s *Store) PutPushSubscription(ctx context.Context, sub agentbridge.PushSubscription) (err error) {
	defer s.guard(time.Now(), &err)
	cats, err := json.Marshal(sub.Categories)
	if err != nil {
		return fmt.Errorf("encode push categories: %w", err)
	}
	return s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
		if _, err := conn.ExecContext(ctx, pushSubPut, sub.Endpoint, sub.P256dh, sub.Auth, sub.Device, string(cats), sub.TokenID, agentbridge.FormatTime(time.Now())); err != nil {
			return fmt.Errorf("store push subscription: %w", err)
		}
		return nil
	})
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

// SetPushOutcome records a delivery's outcome.
func (s *Store) SetPushOutcome(ctx context.Context, endpoint, outcome, at string) (err error) {
	defer s.guard(time.Now(), &err)
	return s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
		if _, err := conn.ExecContext(ctx, pushSubOutcome, outcome, at, endpoint); err != nil {
			return fmt.Errorf("record push outcome: %w", err)
		}
		return nil
	})
}

var _ agentbridge.PushStore = (*Store)(nil)
