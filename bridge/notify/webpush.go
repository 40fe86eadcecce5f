package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/SherClockHolmes/webpush-go"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// pushTo sends note, handed to the notifier at queued, to one subscription
// and keeps the outcome (agentbridge.PushDelivery); a push service
// answering 404 or 410 says the subscription is gone for good (RFC 8030
// §7.3), so it is removed, and its device's deliveries say it expired.
func (n *Notifier) pushTo(ctx context.Context, sub agentbridge.PushSubscription, note Note, queued time.Time) {
	sctx, cancel := context.WithTimeout(ctx, sendTimeout)
	outcome, status, err := n.pushOnce(sctx, sub, note)
	cancel()
	if err != nil {
		// The log, the operator's, says why; the stored outcome does not
		// tell a refused port from a TLS error (contract 8.3).
		n.log.Warn("web push", "device", sub.Device, "event", note.Event, "outcome", outcome, "err", err)
	}
	now := n.opts.Now()
	d := agentbridge.PushDelivery{Endpoint: sub.Endpoint, TokenID: sub.TokenID, Device: sub.Device, Thread: note.Thread,
		Event: note.Event, Category: note.Category, Outcome: outcome, Status: status,
		At: agentbridge.FormatTime(now), LatencyMS: now.Sub(queued).Milliseconds()}
	if n.opts.Observe != nil {
		n.opts.Observe(d)
	}
	if outcome == agentbridge.PushExpired {
		if _, err := n.opts.Store.DeletePushSubscription(ctx, sub.Endpoint); err != nil {
			n.log.Error("remove an expired push subscription", "device", sub.Device, "err", err)
		}
		n.log.Info("push subscription expired; removed", "device", sub.Device, "status", status)
	}
	if err := n.opts.Store.RecordPushDelivery(ctx, d); err != nil {
		n.log.Error("record push outcome", "device", sub.Device, "err", err)
	}
}

// pushOnce makes one Web Push request and names its outcome
// (agentbridge.PushSent, PushExpired, "failed: <status>", or one of the
// words for no answer) with the push service's status (0 when none).
func (n *Notifier) pushOnce(ctx context.Context, sub agentbridge.PushSubscription, note Note) (string, int, error) {
	keys, err := n.Keys(ctx)
	if err != nil {
		return agentbridge.PushFailedPfx + "no VAPID keys", 0, err
	}
	payload, err := json.Marshal(note)
	if err != nil {
		return agentbridge.PushFailedPfx + "encode", 0, fmt.Errorf("encode note: %w", err)
	}
	d := deliveryOf(note.Category)
	resp, err := webpush.SendNotificationWithContext(ctx, payload, &webpush.Subscription{
		Endpoint: sub.Endpoint, Keys: webpush.Keys{P256dh: sub.P256dh, Auth: sub.Auth},
	}, &webpush.Options{
		HTTPClient:      n.push,
		Subscriber:      n.opts.Subject,
		TTL:             d.ttl,
		Urgency:         webpush.Urgency(d.urgency),
		VAPIDPublicKey:  keys.Public,
		VAPIDPrivateKey: keys.Private,
	})
	switch {
	case errors.Is(err, errNotPublic):
		return agentbridge.PushNotPublic, 0, err
	case err != nil:
		// Refused, reset, timed out, a TLS or DNS failure: one word for
		// all, so that the outcome a person token reads maps no port.
		return agentbridge.PushUnreachable, 0, fmt.Errorf("send: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return agentbridge.PushExpired, resp.StatusCode, nil
	case resp.StatusCode/100 != 2:
		return fmt.Sprintf("%s%d", agentbridge.PushFailedPfx, resp.StatusCode), resp.StatusCode, fmt.Errorf("push service answered %s", resp.Status)
	}
	return agentbridge.PushSent, resp.StatusCode, nil
}
