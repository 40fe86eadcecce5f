package bridge

import (
	"context"
	"crypto/sha256"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// Pairing a phone (contract 7.2): `agent-bridge pair` asks for a one-time
// code (POST /auth/pair), prints the link /ui/#pair=<code> and its QR
// code; the page opened from it posts the code (POST /auth/pair/redeem),
// which makes that device its own named person token (7.3) and sets it
// as the login cookie. The code sits in the link's fragment, which
// browsers never send, so a link previewer fetching the URL cannot use
// it up. `agent-bridge devices` lists the paired devices; revoking one
// (DELETE /devices/{id}) revokes its token and drops its push
// subscriptions.

// PairTTL is how long a pairing link works; it works once.
const PairTTL = 10 * time.Minute

// PairedBy is the created_by of a paired device's token.
const PairedBy = "pair"

// maxPairCodes bounds the codes waiting to be used, on the database (all
// bridges on it together).
const maxPairCodes = 64

// seenCredentials is when each credential last made a request to this
// bridge, for the devices list ("last seen" since this bridge started).
// The pairing codes themselves are in the store (agentbridge.PairStore),
// so that a link made through one bridge works through any bridge on the
// same database.
type seenCredentials struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// pairRequest is the body of POST /auth/pair.
type pairRequest struct {
	Name string `json:"name"`
}

// handlePair makes a pairing code for a device named name (a person
// token's route: no other scope may add a person).
func (s *Server) handlePair(w http.ResponseWriter, r *http.Request) error {
	var req pairRequest
	if err := s.decodeStrict(w, r, &req, []string{"name"}, true); err != nil {
		return err
	}
	link, err := s.NewPairLink(r.Context(), req.Name)
	if err != nil {
		return err
	}
	httpjson.Write(w, http.StatusOK, link)
	return nil
}

// NewPairLink makes a one-time pairing link for a device named name
// ("phone" when blank), at the address a phone reaches (notify.public_url,
// else the tailnet's, else the bridge's own): POST /auth/pair's answer,
// and what up --tailnet shows as a QR code.
func (s *Server) NewPairLink(ctx context.Context, name string) (agentbridge.PairLink, error) {
	ps := s.store
	name = strings.TrimSpace(name)
	if name == "" {
		name = "phone"
	}
	if utf8.RuneCountInString(name) > agentbridge.MaxPushDeviceName || !utf8.ValidString(name) {
		return agentbridge.PairLink{}, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "name", "A device name must be text of at most %d characters.", agentbridge.MaxPushDeviceName)
	}
	code, err := agentbridge.NewTokenSecret()
	if err != nil {
		return agentbridge.PairLink{}, err
	}
	now := s.now()
	h := sha256.Sum256([]byte(code))
	added, err := ps.AddPairCode(ctx, h[:], name, now, now.Add(PairTTL), maxPairCodes)
	if err != nil {
		return agentbridge.PairLink{}, storeErr("store the pairing code", err)
	}
	if !added {
		return agentbridge.PairLink{}, agentbridge.Errorf(agentbridge.ECodeTooMany, "%d pairing links are waiting to be used; use one, or wait %s for them to lapse.", maxPairCodes, PairTTL)
	}
	base := strings.TrimRight(s.publicURL(), "/")
	return agentbridge.PairLink{Code: code, URL: base + "/ui/#pair=" + code, Name: name,
		ExpiresAt: agentbridge.FormatTime(now.Add(PairTTL))}, nil
}

// redeemRequest is the body of POST /auth/pair/redeem.
type redeemRequest struct {
	Code string `json:"code"`
}

// handlePairRedeem uses up a pairing code: the device gets its own person
// token, named as asked, as its login cookie. An unknown, used or expired
// code is unauthorized.
func (s *Server) handlePairRedeem(w http.ResponseWriter, r *http.Request) error {
	ts := s.store
	ps := s.store
	var req redeemRequest
	if err := s.decodeStrict(w, r, &req, []string{"code"}, false); err != nil {
		return err
	}
	h := sha256.Sum256([]byte(req.Code))
	name, ok, err := ps.TakePairCode(r.Context(), h[:], s.now())
	if err != nil {
		return storeErr("take the pairing code", err)
	}
	if !ok {
		return agentbridge.FieldErrorf(agentbridge.ECodeUnauthorized, "code",
			"This pairing link is not valid: it was used already or is older than %s. Run agent-bridge pair again for a new one.", PairTTL)
	}
	secret, err := agentbridge.NewTokenSecret()
	if err != nil {
		return err
	}
	t, err := ts.CreateToken(r.Context(), agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: name, CreatedBy: PairedBy}, agentbridge.HashToken(secret))
	if err != nil {
		return storeErr("create the device's token", err)
	}
	s.log.Info("device paired", "token", t.ID, "name", t.Name)
	httpguard.SetLoginCookie(w, r, secret)
	httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "device": t.Name, "id": t.ID})
	return nil
}

// noteSeen records when each credential last made a request.
func (s *Server) noteSeen(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := httpguard.CredentialFrom(r.Context()); ok && c.ID != "" {
			now := s.now()
			s.seen.mu.Lock()
			if s.seen.seen == nil || len(s.seen.seen) >= maxCachedCredentials {
				s.seen.seen = map[string]time.Time{}
			}
			s.seen.seen[c.ID] = now
			s.seen.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// handleDevices lists the paired devices and the push subscriptions.
func (s *Server) handleDevices(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r, queryNone); err != nil {
		return err
	}
	var devices []agentbridge.Device
	byToken := map[string]int{}
	{
		list, err := s.store.Tokens(r.Context())
		if err != nil {
			return storeErr("list tokens", err)
		}
		s.seen.mu.Lock()
		for _, t := range list {
			if t.CreatedBy != PairedBy {
				continue
			}
			d := agentbridge.Device{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt}
			if at, ok := s.seen.seen[t.ID]; ok {
				d.LastSeen = agentbridge.FormatTime(at)
			}
			byToken[t.ID] = len(devices)
			devices = append(devices, d)
		}
		s.seen.mu.Unlock()
	}
	devices, err := s.pushDevices(r.Context(), devices, byToken)
	if err != nil {
		return err
	}
	sort.SliceStable(devices, func(i, j int) bool { return devices[i].CreatedAt < devices[j].CreatedAt })
	if devices == nil {
		devices = []agentbridge.Device{}
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"devices": devices})
	return nil
}

// ExpiredShownFor is how long a browser that is no paired device stays in
// the devices list after its subscription expired (the push service
// answered 404 or 410, and the bridge removed it): long enough for the
// person to see why it went quiet.
const ExpiredShownFor = 7 * 24 * time.Hour

// pushDevices adds to devices (the paired ones, byToken their index by
// token id) the browsers subscribed to push, each device's notifications,
// and its kept deliveries (contract 8.4): a paired device's are those of
// every subscription its token made, so a subscription that expired (and
// was removed) still shows in its device's list; another browser's are
// its endpoint's, and one whose subscription expired within
// ExpiredShownFor is listed with notifications off.
func (s *Server) pushDevices(ctx context.Context, devices []agentbridge.Device, byToken map[string]int) ([]agentbridge.Device, error) {
	subs, err := s.store.PushSubscriptions(ctx)
	if err != nil {
		return nil, storeErr("list push subscriptions", err)
	}
	kept, err := s.store.PushDeliveries(ctx)
	if err != nil {
		return nil, storeErr("list push deliveries", err)
	}
	byDevice := map[string][]agentbridge.PushDelivery{}
	byEndpoint := map[string][]agentbridge.PushDelivery{}
	for _, d := range kept {
		byDevice[d.DeviceKey()] = append(byDevice[d.DeviceKey()], d)
		byEndpoint[d.Endpoint] = append(byEndpoint[d.Endpoint], d)
	}
	for t, i := range byToken {
		devices[i].Deliveries = byDevice["token:"+t]
	}
	subscribed := map[string]bool{}
	for _, sub := range subs {
		subscribed[sub.Endpoint] = true
		i, ok := byToken[sub.TokenID]
		if !ok || devices[i].Notifications {
			// Another browser: a device of its own.
			i = len(devices)
			devices = append(devices, agentbridge.Device{Name: sub.Device, CreatedAt: sub.CreatedAt, Deliveries: byEndpoint[sub.Endpoint]})
		}
		cats := sub.Categories
		d := &devices[i]
		d.Notifications, d.Categories = true, &cats
	}
	devices = append(devices, s.expiredBrowsers(kept, subscribed, byToken, byEndpoint)...)
	for i := range devices {
		if d := &devices[i]; len(d.Deliveries) > 0 {
			d.LastOutcome, d.LastAt = d.Deliveries[0].Outcome, d.Deliveries[0].At
		}
	}
	return devices, nil
}

// expiredBrowsers are the browsers, no paired device's, whose subscription
// expired within ExpiredShownFor: an endpoint no longer subscribed whose
// newest kept delivery (kept is newest first) is PushExpired.
func (s *Server) expiredBrowsers(kept []agentbridge.PushDelivery, subscribed map[string]bool, byToken map[string]int,
	byEndpoint map[string][]agentbridge.PushDelivery) []agentbridge.Device {
	var out []agentbridge.Device
	seen := map[string]bool{}
	for _, d := range kept {
		if seen[d.Endpoint] || subscribed[d.Endpoint] {
			continue
		}
		seen[d.Endpoint] = true
		if _, paired := byToken[d.TokenID]; paired || d.Outcome != agentbridge.PushExpired {
			continue
		}
		if at, err := agentbridge.ParseTime(d.At); err != nil || s.now().Sub(at) > ExpiredShownFor {
			continue
		}
		out = append(out, agentbridge.Device{Name: d.Device, Deliveries: byEndpoint[d.Endpoint]})
	}
	return out
}

// handleDeviceRevoke ends a paired device's access: its token is revoked
// (refused at once by this bridge, within a second by others on the same
// database) and its push subscriptions removed.
func (s *Server) handleDeviceRevoke(w http.ResponseWriter, r *http.Request) error {
	ts := s.store
	id := chi.URLParam(r, "id")
	list, err := ts.Tokens(r.Context())
	if err != nil {
		return storeErr("list tokens", err)
	}
	found := false
	for _, t := range list {
		found = found || (t.ID == id && t.CreatedBy == PairedBy)
	}
	if !found {
		return agentbridge.Errorf(agentbridge.ECodeTokenNotFound, "No paired device has the id %q; agent-bridge devices lists them.", agentbridge.Clip(id, agentbridge.QuoteRunes))
	}
	t, err := ts.RevokeToken(r.Context(), id)
	if err != nil {
		return storeErr("revoke the device's token", err)
	}
	s.credCache.drop(t.ID)
	if err := s.store.DeleteTokenPushSubscriptions(r.Context(), t.ID); err != nil {
		return storeErr("remove the device's push subscriptions", err)
	}
	s.log.Info("device revoked", "token", t.ID, "name", t.Name, "by", credential(r).ID)
	httpjson.Write(w, http.StatusOK, agentbridge.Device{ID: t.ID, Name: t.Name, CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt})
	return nil
}
