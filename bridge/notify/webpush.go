package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/SherClockHolmes/webpush-go"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// The outcomes a delivery records (agentbridge.PushSubscription.LastOutcome).
const (
	OutcomeDelivered = "delivered"
	OutcomeGone      = "gone"
)

// push sends note to one subscription and records the outcome; a push
// service answering 404 or 410 says the subscription is gone for good
// (RFC 8030 §7.3), so it is removed.
func (n *Notifier) push(ctx context.Context, sub agentbridge.PushSubscription, note Note) {
	outcome, err := n.pushOnce(ctx, sub, note)
	if err != nil {
		n.log.Warn("web push", "device", sub.Device, "event", note.Event, "err", err)
	}
	at := agentbridge.FormatTime(n.opts.Now())
	if outcome == OutcomeGone {
		if _, err := n.opts.Store.DeletePushSubscription(ctx, sub.Endpoint); err != nil {
			n.log.Error("remove a gone push subscription", "device", sub.Device, "err", err)
		}
		n.log.Info("push subscription gone; removed", "device", sub.Device)
		return
	}
	if err := n.opts.Store.SetPushOutcome(ctx, sub.Endpoint, outcome, at); err != nil {
		n.log.Error("record push outcome", "device", sub.Device, "err", err)
	}
}

// pushOnce makes one Web Push request and names its outcome.
func (n *Notifier) pushOnce(ctx context.Context, sub agentbridge.PushSubscription, note Note) (string, error) {
	keys, err := n.Keys(ctx)
	if err != nil {
		return "failed: no VAPID keys", err
	}
	payload, err := json.Marshal(note)
	if err != nil {
		return "failed: encode", fmt.Errorf("encode note: %w", err)
	}
	d := deliveryOf(note.Category)
	resp, err := webpush.SendNotificationWithContext(ctx, payload, &webpush.Subscription{
		Endpoint: sub.Endpoint, Keys: webpush.Keys{P256dh: sub.P256dh, Auth: sub.Auth},
	}, &webpush.Options{
		HTTPClient:      n.opts.Client,
		Subscriber:      n.opts.Subject,
		TTL:             d.ttl,
		Urgency:         webpush.Urgency(d.urgency),
		VAPIDPublicKey:  keys.Public,
		VAPIDPrivateKey: keys.Private,
	})
	if err != nil {
		return "failed: " + agentbridge.Clip(err.Error(), 120), fmt.Errorf("send: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return OutcomeGone, nil
	case resp.StatusCode/100 != 2:
		return fmt.Sprintf("failed: HTTP %d", resp.StatusCode), fmt.Errorf("push service answered %s", resp.Status)
	}
	return OutcomeDelivered, nil
}
