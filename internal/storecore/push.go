package storecore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Push subscriptions and their deliveries are not events: both stores keep
// them in two tables (push_subscriptions, push_deliveries), and only the
// SQL's placeholders and who writes it differ.

// PushCapKeySQL is agentbridge.PushCapKey of a push_subscriptions row.
const PushCapKeySQL = `CASE WHEN token_id <> '' THEN 'token:' || token_id ELSE 'device:' || device END`

// PushDeliveryColumns are the columns ScanPushDelivery reads, in order;
// PushDeliveryValues gives an insert device_key and then them.
const PushDeliveryColumns = "endpoint, token_id, device, thread, event, category, outcome, status, at, latency_ms"

// PushDeliveriesSelect lists the kept deliveries, newest first.
const PushDeliveriesSelect = `SELECT ` + PushDeliveryColumns + ` FROM push_deliveries ORDER BY seq DESC`

// PushDeliveryValues are d's device key and PushDeliveryColumns' values.
func PushDeliveryValues(d agentbridge.PushDelivery) []any {
	return []any{d.DeviceKey(), d.Endpoint, d.TokenID, d.Device, d.Thread, d.Event, d.Category, d.Outcome, d.Status, d.At, d.LatencyMS}
}

// ScanPushDelivery scans a PushDeliveryColumns row.
func ScanPushDelivery(r Row) (agentbridge.PushDelivery, error) {
	var d agentbridge.PushDelivery
	err := r.Scan(&d.Endpoint, &d.TokenID, &d.Device, &d.Thread, &d.Event, &d.Category, &d.Outcome, &d.Status, &d.At, &d.LatencyMS)
	return d, err
}

var _ agentbridge.PushStore = (*Engine)(nil)

// PushKeys returns the stored VAPID keys, storing candidate when there are
// none; of several bridges on one database the first insert wins and all
// read the same row.
func (e *Engine) PushKeys(ctx context.Context, candidate agentbridge.PushKeys) (_ agentbridge.PushKeys, err error) {
	defer e.Guard(time.Now(), &err)
	var k agentbridge.PushKeys
	err = e.Write(ctx, func(ctx context.Context, c Conn) error {
		if _, err := c.Exec(ctx, `INSERT INTO push_keys (id, public_key, private_key, created_at) VALUES (1, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			candidate.Public, candidate.Private, agentbridge.FormatTime(time.Now())); err != nil {
			return fmt.Errorf("store push keys: %w", err)
		}
		if err := c.QueryRow(ctx, `SELECT public_key, private_key FROM push_keys WHERE id = 1`).Scan(&k.Public, &k.Private); err != nil {
			return fmt.Errorf("read push keys: %w", err)
		}
		return nil
	})
	return k, err
}

// PutPushSubscription stores sub, replacing the one with its endpoint; a
// new endpoint past limits is refused. The count and the insert are one
// step, under a lock across bridges.
func (e *Engine) PutPushSubscription(ctx context.Context, sub agentbridge.PushSubscription, limits agentbridge.PushLimits) (err error) {
	defer e.Guard(time.Now(), &err)
	cats, err := json.Marshal(sub.Categories)
	if err != nil {
		return fmt.Errorf("encode push categories: %w", err)
	}
	return e.Write(ctx, func(ctx context.Context, c Conn) error {
		if err := e.lock(ctx, c, "push-subscriptions"); err != nil {
			return err
		}
		var exists, total, mine int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM push_subscriptions WHERE endpoint = ?`, sub.Endpoint).Scan(&exists); err != nil {
			return fmt.Errorf("look up push subscription: %w", err)
		}
		if exists == 0 {
			if err := c.QueryRow(ctx, `SELECT count(*), coalesce(sum(CASE WHEN `+PushCapKeySQL+` = ? THEN 1 ELSE 0 END), 0) FROM push_subscriptions`,
				agentbridge.PushCapKey(sub.TokenID, sub.Device)).Scan(&total, &mine); err != nil {
				return fmt.Errorf("count push subscriptions: %w", err)
			}
			if refusal := limits.Check(mine, total); refusal != nil {
				return refusal
			}
		}
		if _, err := c.Exec(ctx, `INSERT INTO push_subscriptions (endpoint, p256dh, auth, device, categories, token_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (endpoint) DO UPDATE SET p256dh = excluded.p256dh, auth = excluded.auth, device = excluded.device, categories = excluded.categories, token_id = excluded.token_id`,
			sub.Endpoint, sub.P256dh, sub.Auth, sub.Device, string(cats), sub.TokenID, agentbridge.FormatTime(time.Now())); err != nil {
			return fmt.Errorf("store push subscription: %w", err)
		}
		return nil
	})
}

// PushSubscriptions lists the subscriptions, oldest first.
func (e *Engine) PushSubscriptions(ctx context.Context) (_ []agentbridge.PushSubscription, err error) {
	defer e.Guard(time.Now(), &err)
	return List(ctx, e.Read, "push subscriptions", ScanPushSubscription, `SELECT `+PushSubscriptionColumns+` FROM push_subscriptions ORDER BY seq`)
}

// DeletePushSubscription removes endpoint's subscription.
func (e *Engine) DeletePushSubscription(ctx context.Context, endpoint string) (found bool, err error) {
	defer e.Guard(time.Now(), &err)
	err = e.Write(ctx, func(ctx context.Context, c Conn) error {
		n, err := c.Exec(ctx, `DELETE FROM push_subscriptions WHERE endpoint = ?`, endpoint)
		if err != nil {
			return fmt.Errorf("delete push subscription: %w", err)
		}
		found = n > 0
		return nil
	})
	return found, err
}

// DeleteTokenPushSubscriptions removes the subscriptions made with token
// id.
func (e *Engine) DeleteTokenPushSubscriptions(ctx context.Context, tokenID string) (err error) {
	defer e.Guard(time.Now(), &err)
	return e.Write(ctx, func(ctx context.Context, c Conn) error {
		if _, err := c.Exec(ctx, `DELETE FROM push_subscriptions WHERE token_id = ?`, tokenID); err != nil {
			return fmt.Errorf("delete a token's push subscriptions: %w", err)
		}
		return nil
	})
}

// RecordPushDelivery keeps d and makes it its subscription's last
// outcome; the newest MaxPushDeliveries of the device, and
// MaxPushDeliveriesKept in all, are kept.
func (e *Engine) RecordPushDelivery(ctx context.Context, d agentbridge.PushDelivery) (err error) {
	defer e.Guard(time.Now(), &err)
	return e.Write(ctx, func(ctx context.Context, c Conn) error {
		for _, st := range []struct {
			q    string
			args []any
		}{
			{`UPDATE push_subscriptions SET last_outcome = ?, last_at = ? WHERE endpoint = ?`, []any{d.Outcome, d.At, d.Endpoint}},
			{`INSERT INTO push_deliveries (device_key, ` + PushDeliveryColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, PushDeliveryValues(d)},
			{`DELETE FROM push_deliveries WHERE device_key = ? AND seq <= coalesce(
		(SELECT seq FROM push_deliveries WHERE device_key = ? ORDER BY seq DESC LIMIT 1 OFFSET ?), 0)`, []any{d.DeviceKey(), d.DeviceKey(), agentbridge.MaxPushDeliveries}},
			{`DELETE FROM push_deliveries WHERE seq <= coalesce(
		(SELECT seq FROM push_deliveries ORDER BY seq DESC LIMIT 1 OFFSET ?), 0)`, []any{agentbridge.MaxPushDeliveriesKept}},
		} {
			if _, err := c.Exec(ctx, st.q, st.args...); err != nil {
				return fmt.Errorf("record push delivery: %w", err)
			}
		}
		return nil
	})
}

// PushDeliveries lists the kept deliveries, newest first.
func (e *Engine) PushDeliveries(ctx context.Context) (_ []agentbridge.PushDelivery, err error) {
	defer e.Guard(time.Now(), &err)
	return List(ctx, e.Read, "push deliveries", ScanPushDelivery, PushDeliveriesSelect)
}
