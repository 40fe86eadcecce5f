package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
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

// PutPushSubscription stores sub, replacing the one with its endpoint.
func (s *Store) PutPushSubscription(ctx context.Context, sub agentbridge.PushSubscription) (err error) {
	defer s.guard(time.Now(), &err)
	cats, err := json.Marshal(sub.Categories)
	if err != nil {
		return fmt.Errorf("encode push categories: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO push_subscriptions (endpoint, p256dh, auth, device, categories, token_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (endpoint) DO UPDATE SET p256dh = excluded.p256dh, auth = excluded.auth, device = excluded.device, categories = excluded.categories, token_id = excluded.token_id`,
		sub.Endpoint, sub.P256dh, sub.Auth, sub.Device, string(cats), sub.TokenID, agentbridge.FormatTime(time.Now())); err != nil {
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

// SetPushOutcome records a delivery's outcome.
func (s *Store) SetPushOutcome(ctx context.Context, endpoint, outcome, at string) (err error) {
	defer s.guard(time.Now(), &err)
	if _, err := s.pool.Exec(ctx, `UPDATE push_subscriptions SET last_outcome = $1, last_at = $2 WHERE endpoint = $3`, outcome, at, endpoint); err != nil {
		return fmt.Errorf("record push outcome: %w", err)
	}
	return nil
}

var _ agentbridge.PushStore = (*Store)(nil)
