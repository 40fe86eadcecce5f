package agentbridge

import (
	"context"
	"encoding/base64"
	"net"
	"net/url"
	"strings"
	"unicode/utf8"
)

// The categories of what reaches a person away from the desk (contract
// 7.2): what is addressed to a human, and, opt-in per thread, any reply.
const (
	PushPermission = "permission"
	PushQuestion   = "question"
	PushFailed     = "failed"
	PushReply      = "reply"
)

// Limits of a push subscription's fields.
const (
	MaxPushEndpoint   = 2048
	MaxPushDeviceName = 64
	MaxPushThreads    = 100
)

// Caps on what the push store keeps (contract 8.3, 8.4).
const (
	// MaxPushPerDevice bounds the subscriptions of one device: the
	// credential that subscribed (a paired device's token), else the
	// device's name.
	MaxPushPerDevice = 10
	// DefaultMaxPushSubscriptions bounds the subscriptions in all (the
	// bridge config's notify.max_subscriptions changes it).
	DefaultMaxPushSubscriptions = 200
	// MaxPushDeliveries is how many delivery outcomes are kept per device
	// (PushDelivery.DeviceKey), the newest.
	MaxPushDeliveries = 100
	// MaxPushDeliveriesKept bounds the outcomes kept in all, so that those
	// of devices long gone do not pile up.
	MaxPushDeliveriesKept = 256 * MaxPushDeliveries
)

// PushLimits are the caps PutPushSubscription applies to a new endpoint.
type PushLimits struct {
	// PerDevice and Total: MaxPushPerDevice and
	// DefaultMaxPushSubscriptions when 0.
	PerDevice, Total int
}

// WithDefaults fills the zero caps.
func (l PushLimits) WithDefaults() PushLimits {
	if l.PerDevice <= 0 {
		l.PerDevice = MaxPushPerDevice
	}
	if l.Total <= 0 {
		l.Total = DefaultMaxPushSubscriptions
	}
	return l
}

// Check decides a new subscription of a device that has perDevice of its
// own among total: nil, or 429 too_many saying which cap and what to do.
func (l PushLimits) Check(perDevice, total int) error {
	l = l.WithDefaults()
	switch {
	case perDevice >= l.PerDevice:
		return Errorf(ECodeTooMany, "This device has %d push subscriptions already, its limit; turn notifications off in one of its browsers first (or revoke the device: agent-bridge devices revoke).", l.PerDevice)
	case total >= l.Total:
		return Errorf(ECodeTooMany, "This bridge keeps %d push subscriptions already, its limit; remove one first (agent-bridge devices), or raise notify.max_subscriptions in the bridge config.", l.Total)
	}
	return nil
}

// PushCapKey is the device a subscription counts against in
// PushLimits.PerDevice: the credential that subscribed, else the
// device's name (an open bridge's browsers).
func PushCapKey(tokenID, device string) string {
	if tokenID != "" {
		return "token:" + tokenID
	}
	return "device:" + device
}

// The outcomes of a delivery (PushDelivery.Outcome): sent, expired (the
// push service answered 404 or 410: the subscription is removed), or
// "failed: " and why: the service's HTTP status ("failed: 500"), or one
// word when there was no answer.
const (
	PushSent        = "sent"
	PushExpired     = "expired"
	PushFailedPfx   = "failed: "
	PushUnreachable = PushFailedPfx + "unreachable"
	PushNotPublic   = PushFailedPfx + "not a public address"
)

// PushDelivery is the outcome of one push to one device (contract 8.4),
// as the store keeps it: the newest MaxPushDeliveries per device.
type PushDelivery struct {
	// Endpoint and TokenID name the subscription pushed to (neither is
	// shown: GET /devices groups deliveries by device).
	Endpoint string `json:"-"`
	TokenID  string `json:"-"`
	// Device is the device's name when it was pushed to.
	Device   string `json:"device"`
	Thread   string `json:"thread"`
	Event    string `json:"event"`
	Category string `json:"category"`
	// Outcome is PushSent, PushExpired or "failed: …".
	Outcome string `json:"outcome"`
	// Status is the push service's HTTP status (0: no answer).
	Status int    `json:"status,omitempty"`
	At     string `json:"at"`
	// LatencyMS is from the event reaching the notifier to the push
	// service's answer.
	LatencyMS int64 `json:"latency_ms"`
}

// DeviceKey is the device a delivery is kept under: the credential that
// subscribed, else the endpoint.
func (d PushDelivery) DeviceKey() string {
	if d.TokenID != "" {
		return "token:" + d.TokenID
	}
	return "endpoint:" + d.Endpoint
}

// PushCategories are the categories one device wants; Threads are the
// threads whose every reply it wants too.
type PushCategories struct {
	Permission bool     `json:"permission"`
	Question   bool     `json:"question"`
	Failed     bool     `json:"failed"`
	Threads    []string `json:"threads,omitempty"`
}

// Wants reports whether a device with these choices wants a notification
// of category in thread.
func (c PushCategories) Wants(category, thread string) bool {
	switch category {
	case PushPermission:
		return c.Permission
	case PushQuestion:
		return c.Question
	case PushFailed:
		return c.Failed
	case PushReply:
		for _, t := range c.Threads {
			if t == thread {
				return true
			}
		}
	}
	return false
}

// PushKeys are the bridge's VAPID key pair (RFC 8292), base64url without
// padding as the Push API takes them: Public is the uncompressed P-256
// point a browser subscribes with, Private the 32-byte scalar.
type PushKeys struct {
	Public  string `json:"public_key"`
	Private string `json:"-"`
}

// PushSubscription is one browser's Web Push subscription (the Push API's
// PushSubscription: endpoint and keys) with the device's name and choices,
// and the outcome of the last delivery to it.
type PushSubscription struct {
	Endpoint   string         `json:"endpoint"`
	P256dh     string         `json:"p256dh"`
	Auth       string         `json:"auth"`
	Device     string         `json:"device"`
	Categories PushCategories `json:"categories"`
	// TokenID is the credential that subscribed (a paired device's
	// token), "" on an open bridge.
	TokenID   string `json:"token_id,omitempty"`
	CreatedAt string `json:"created_at"`
	// LastOutcome is the last delivery's PushDelivery.Outcome (an older
	// release wrote "delivered" and "gone"); LastAt is when ("" before the
	// first delivery).
	LastOutcome string `json:"last_outcome,omitempty"`
	LastAt      string `json:"last_at,omitempty"`
}

// Validate checks a subscription a browser sends: an https endpoint (http
// only on a loopback host, for a push service on this machine), the
// subscription's P-256 public key and 16-byte auth secret, a device name
// and the threads it opted in to.
func (s *PushSubscription) Validate() error {
	u, err := url.Parse(s.Endpoint)
	switch {
	case s.Endpoint == "":
		return FieldErrorf(ECodeMissingField, "endpoint", "The field \"endpoint\" is required: the push subscription's endpoint URL.")
	case len(s.Endpoint) > MaxPushEndpoint || err != nil || u.Host == "" || !(u.Scheme == "https" || u.Scheme == "http" && loopbackHost(u.Hostname())):
		return FieldErrorf(ECodeInvalidField, "endpoint", "The push endpoint must be an https URL of at most %d bytes.", MaxPushEndpoint)
	}
	if k, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s.P256dh, "=")); err != nil || len(k) != 65 || k[0] != 4 {
		return FieldErrorf(ECodeInvalidField, "p256dh", "The subscription key p256dh must be an uncompressed P-256 point in base64url (65 bytes).")
	}
	if a, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s.Auth, "=")); err != nil || len(a) != 16 {
		return FieldErrorf(ECodeInvalidField, "auth", "The subscription secret auth must be 16 bytes in base64url.")
	}
	s.Device = strings.TrimSpace(s.Device)
	if s.Device == "" {
		s.Device = "browser"
	}
	if utf8.RuneCountInString(s.Device) > MaxPushDeviceName || !utf8.ValidString(s.Device) {
		return FieldErrorf(ECodeInvalidField, "device", "A device name must be text of at most %d characters.", MaxPushDeviceName)
	}
	if len(s.Categories.Threads) > MaxPushThreads {
		return FieldErrorf(ECodeInvalidField, "categories.threads", "At most %d threads may send every reply.", MaxPushThreads)
	}
	for _, t := range s.Categories.Threads {
		if !ThreadIDPattern.MatchString(t) {
			return FieldErrorf(ECodeInvalidField, "categories.threads", "The thread id %q is not valid.", Clip(t, QuoteRunes))
		}
	}
	return nil
}

// loopbackHost reports whether host names this machine.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// PushStore keeps the bridge's VAPID keys and the push subscriptions, in
// the event store's database so that several bridges on one PostgreSQL
// sign with one key and know every device. Implementations are safe for
// concurrent use.
type PushStore interface {
	// PushKeys returns the stored key pair; when there is none it stores
	// candidate first. Of several bridges starting at once, the first
	// write wins and every one returns the same pair.
	PushKeys(ctx context.Context, candidate PushKeys) (PushKeys, error)
	// PutPushSubscription stores s (validated by the caller), replacing
	// the subscription with the same endpoint but keeping its last
	// outcome. A new endpoint past limits (its device's subscriptions,
	// PushCapKey, or all of them) is refused with PushLimits.Check's
	// error and nothing stored; of several bridges on one database the
	// count and the insert are one step.
	PutPushSubscription(ctx context.Context, s PushSubscription, limits PushLimits) error
	// PushSubscriptions lists every subscription, oldest first.
	PushSubscriptions(ctx context.Context) ([]PushSubscription, error)
	// DeletePushSubscription removes the subscription of endpoint and
	// reports whether there was one.
	DeletePushSubscription(ctx context.Context, endpoint string) (bool, error)
	// DeleteTokenPushSubscriptions removes the subscriptions made with
	// token id (a device whose access is revoked).
	DeleteTokenPushSubscriptions(ctx context.Context, tokenID string) error
	// RecordPushDelivery keeps d among its device's newest
	// MaxPushDeliveries (and MaxPushDeliveriesKept in all) and makes it
	// its subscription's last outcome; a subscription no longer stored
	// is no error (a 410 removes it first).
	RecordPushDelivery(ctx context.Context, d PushDelivery) error
	// PushDeliveries lists the kept deliveries, newest first.
	PushDeliveries(ctx context.Context) ([]PushDelivery, error)
}

// Device is one entry of GET /devices: a paired device (its token) or a
// browser subscribed to push with another credential, with its
// notifications and last delivery.
type Device struct {
	// ID is the device's token id ("" for a subscription made with the
	// server's own token).
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at,omitempty"`
	RevokedAt string `json:"revoked_at,omitempty"`
	// LastSeen is the device's last request to this bridge since it
	// started ("" when none).
	LastSeen      string          `json:"last_seen,omitempty"`
	Notifications bool            `json:"notifications"`
	Categories    *PushCategories `json:"categories,omitempty"`
	LastOutcome   string          `json:"last_outcome,omitempty"`
	LastAt        string          `json:"last_at,omitempty"`
	// Deliveries are the device's kept push outcomes, newest first
	// (contract 8.4).
	Deliveries []PushDelivery `json:"deliveries,omitempty"`
}

// PairLink is the answer of POST /auth/pair: a one-time link that pairs a
// device (its code in the link's fragment), valid until ExpiresAt.
type PairLink struct {
	Code      string `json:"code"`
	URL       string `json:"url"`
	Name      string `json:"name"`
	ExpiresAt string `json:"expires_at"`
}
