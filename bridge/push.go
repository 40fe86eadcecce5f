package bridge

import (
	"net/http"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/notify"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// handlePushKey answers the VAPID public key a browser subscribes with
// (PushManager.subscribe's applicationServerKey), generating the key pair
// on first use.
func (s *Server) handlePushKey(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r, queryNone); err != nil {
		return err
	}
	k, err := s.notifier.Keys(r.Context())
	if err != nil {
		return storeErr("push keys", err)
	}
	httpjson.Write(w, http.StatusOK, k)
	return nil
}

// subscribeRequest is the body of POST /push/subscriptions: the browser's
// PushSubscription (its toJSON shape) with the device's name and choices.
type subscribeRequest struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
	ExpirationTime *float64                   `json:"expirationTime"`
	Device         string                     `json:"device"`
	Categories     agentbridge.PushCategories `json:"categories"`
}

// handlePushSubscribe stores (or replaces) a device's subscription.
func (s *Server) handlePushSubscribe(w http.ResponseWriter, r *http.Request) error {
	ps := s.store
	var req subscribeRequest
	if err := s.decodeStrict(w, r, &req, []string{"endpoint", "keys", "expirationTime", "device", "categories"}, false); err != nil {
		return err
	}
	sub := agentbridge.PushSubscription{Endpoint: req.Endpoint, P256dh: req.Keys.P256dh, Auth: req.Keys.Auth, Device: req.Device,
		Categories: req.Categories, TokenID: credential(r).ID}
	if err := sub.Validate(); err != nil {
		return err
	}
	if err := notify.CheckEndpoint(sub.Endpoint, s.opts.Notify.AllowPrivateEndpoints); err != nil {
		return err
	}
	limits := agentbridge.PushLimits{Total: s.opts.Notify.MaxSubscriptions}
	if err := ps.PutPushSubscription(r.Context(), sub, limits); err != nil {
		return storeErr("push subscribe", err)
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "device": sub.Device, "categories": sub.Categories})
	return nil
}

// pushDevice is one device in GET /push/subscriptions: what `agentbridge
// devices` shows; the subscription's keys stay in the store.
type pushDevice struct {
	Device      string                     `json:"device"`
	Endpoint    string                     `json:"endpoint"`
	Categories  agentbridge.PushCategories `json:"categories"`
	CreatedAt   string                     `json:"created_at"`
	LastOutcome string                     `json:"last_outcome,omitempty"`
	LastAt      string                     `json:"last_at,omitempty"`
}

// handlePushList lists the subscribed devices and their last delivery.
func (s *Server) handlePushList(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r, queryNone); err != nil {
		return err
	}
	ps := s.store
	subs, err := ps.PushSubscriptions(r.Context())
	if err != nil {
		return storeErr("push subscriptions", err)
	}
	out := make([]pushDevice, 0, len(subs))
	for _, sub := range subs {
		out = append(out, pushDevice{sub.Device, sub.Endpoint, sub.Categories, sub.CreatedAt, sub.LastOutcome, sub.LastAt})
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"subscriptions": out})
	return nil
}

// endpointRequest names a subscription by its endpoint.
type endpointRequest struct {
	Endpoint string `json:"endpoint"`
}

// handlePushUnsubscribe removes a device's subscription (notifications
// turned off in that browser).
func (s *Server) handlePushUnsubscribe(w http.ResponseWriter, r *http.Request) error {
	ps := s.store
	var req endpointRequest
	if err := s.decodeStrict(w, r, &req, []string{"endpoint"}, false); err != nil {
		return err
	}
	if req.Endpoint == "" {
		return agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "endpoint", "The field \"endpoint\" is required: the subscription to remove.")
	}
	found, err := ps.DeletePushSubscription(r.Context(), req.Endpoint)
	if err != nil {
		return storeErr("push unsubscribe", err)
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "removed": found})
	return nil
}

// visibleRequest is the body of POST /push/visible: the page of the device
// subscribed at endpoint shows thread ("" or visible false: nothing).
type visibleRequest struct {
	Endpoint string `json:"endpoint"`
	Thread   string `json:"thread"`
	Visible  bool   `json:"visible"`
}

// handlePushVisible records where a device's page is visible, so that no
// push interrupts a person already looking at the thread. The page sends
// it when it shows or hides a thread and every 20 s while it shows one;
// it lapses after notify.DefaultVisibleTTL.
func (s *Server) handlePushVisible(w http.ResponseWriter, r *http.Request) error {
	var req visibleRequest
	if err := s.decodeStrict(w, r, &req, []string{"endpoint", "thread", "visible"}, false); err != nil {
		return err
	}
	if req.Endpoint == "" {
		return agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "endpoint", "The field \"endpoint\" is required: this browser's push subscription.")
	}
	if req.Visible && !agentbridge.ThreadIDPattern.MatchString(req.Thread) {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "thread", "A visible page names the thread it shows.")
	}
	s.notifier.SetVisible(req.Endpoint, req.Thread, req.Visible)
	httpjson.Write(w, http.StatusOK, map[string]any{"ok": true})
	return nil
}
