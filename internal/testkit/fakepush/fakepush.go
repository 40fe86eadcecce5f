// Package fakepush is a Web Push service for tests: it hands out
// subscriptions (a P-256 key pair and an auth secret of its own, as a
// browser would), and for each push request it checks the VAPID
// authorization (RFC 8292: an ES256 JWT whose audience is this service's
// origin, signed by the key the request names, which must be the
// expected application server key) and decrypts the aes128gcm payload
// (RFC 8291, RFC 8188) with the subscription's private key. It is the
// receiving end only, written from the RFCs with the standard library, so
// that the sender's library is checked against an independent reading.
package fakepush

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Message is one push request the service accepted or refused.
type Message struct {
	Endpoint string
	// Payload is the decrypted payload (nil when refused).
	Payload []byte
	TTL     string
	Urgency string
	// Status is what the service answered (SetStatus's status for a
	// valid push); Err says why it refused an invalid one.
	Status int
	Err    error
	At     time.Time
}

// Subscription is what a browser's PushManager.subscribe returns, as the
// bridge's POST /push/subscriptions takes it.
type Subscription struct {
	Endpoint string
	P256dh   string
	Auth     string
}

type sub struct {
	priv   *ecdh.PrivateKey
	auth   []byte
	status int // answered to every push, 201 by default
}

// Service is a running fake push service.
type Service struct {
	srv *httptest.Server

	mu   sync.Mutex
	key  string // the expected VAPID public key, "" = any
	subs map[string]*sub
	msgs []Message
	// got receives one value per request, after it is recorded.
	got chan struct{}
}

// Start starts a service on 127.0.0.1; Close stops it.
func Start() *Service {
	s := &Service{subs: map[string]*sub{}, got: make(chan struct{}, 4096)}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close stops the service.
func (s *Service) Close() { s.srv.Close() }

// ExpectKey makes the service refuse (403) a push signed with any VAPID
// public key but key (base64url).
func (s *Service) ExpectKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.key = key
}

// Subscribe creates a subscription whose pushes this service accepts.
func (s *Service) Subscribe() (Subscription, error) {
	priv, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return Subscription{}, err
	}
	auth := make([]byte, 16)
	if _, err := rand.Read(auth); err != nil {
		return Subscription{}, err
	}
	id := make([]byte, 12)
	if _, err := rand.Read(id); err != nil {
		return Subscription{}, err
	}
	ep := s.srv.URL + "/push/" + base64.RawURLEncoding.EncodeToString(id)
	s.mu.Lock()
	s.subs[ep] = &sub{priv: priv, auth: auth, status: http.StatusCreated}
	s.mu.Unlock()
	b64 := base64.RawURLEncoding.EncodeToString
	return Subscription{Endpoint: ep, P256dh: b64(priv.PublicKey().Bytes()), Auth: b64(auth)}, nil
}

// SetStatus makes the service answer every push to endpoint with status
// (410 Gone says the subscription has expired).
func (s *Service) SetStatus(endpoint string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sb := s.subs[endpoint]; sb != nil {
		sb.status = status
	}
}

// Received gets one value per push request received (up to 4,096 not yet
// taken), for a benchmark that waits for each.
func (s *Service) Received() <-chan struct{} { return s.got }

// Messages returns the push requests received so far.
func (s *Service) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request) {
	m := Message{Endpoint: s.srv.URL + r.URL.Path, TTL: r.Header.Get("TTL"), Urgency: r.Header.Get("Urgency"), At: time.Now()}
	s.mu.Lock()
	sb, key := s.subs[m.Endpoint], s.key
	s.mu.Unlock()
	m.Status, m.Payload, m.Err = s.check(r, sb, key)
	if m.Err != nil {
		m.Payload = nil
	}
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
	select {
	case s.got <- struct{}{}:
	default: // nobody is counting
	}
	w.WriteHeader(m.Status)
	if m.Err != nil {
		_, _ = io.WriteString(w, m.Err.Error())
	}
}

// check validates one push request and decrypts its payload.
func (s *Service) check(r *http.Request, sb *sub, key string) (int, []byte, error) {
	switch {
	case r.Method != http.MethodPost:
		return http.StatusMethodNotAllowed, nil, fmt.Errorf("method %s", r.Method)
	case sb == nil:
		return http.StatusNotFound, nil, errors.New("no such subscription")
	case r.Header.Get("TTL") == "":
		return http.StatusBadRequest, nil, errors.New("no TTL header (RFC 8030 §5.2)")
	case r.Header.Get("Content-Encoding") != "aes128gcm":
		return http.StatusBadRequest, nil, fmt.Errorf("Content-Encoding %q, want aes128gcm", r.Header.Get("Content-Encoding"))
	}
	if err := s.checkVAPID(r.Header.Get("Authorization"), key); err != nil {
		return http.StatusForbidden, nil, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8192))
	if err != nil {
		return http.StatusBadRequest, nil, err
	}
	plain, err := decrypt(body, sb.priv, sb.auth)
	if err != nil {
		return http.StatusBadRequest, nil, err
	}
	return sb.status, plain, nil
}

// checkVAPID verifies "vapid t=<jwt>, k=<key>" (RFC 8292 §3).
func (s *Service) checkVAPID(h, want string) error {
	rest, ok := strings.CutPrefix(h, "vapid ")
	if !ok {
		return fmt.Errorf("authorization %q is not vapid", h)
	}
	var tok, k string
	for part := range strings.SplitSeq(rest, ",") {
		part = strings.TrimSpace(part)
		if v, ok := strings.CutPrefix(part, "t="); ok {
			tok = v
		} else if v, ok := strings.CutPrefix(part, "k="); ok {
			k = v
		}
	}
	if want != "" && k != want {
		return fmt.Errorf("signed with key %q, want the bridge's %q", k, want)
	}
	pub, err := base64.RawURLEncoding.DecodeString(k)
	if err != nil {
		return fmt.Errorf("key: %w", err)
	}
	pk, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pub)
	if err != nil {
		return fmt.Errorf("key is not a P-256 point: %w", err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errors.New("token is not a JWT")
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Aud string `json:"aud"`
		Exp int64  `json:"exp"`
		Sub string `json:"sub"`
	}
	if err := decodeSegment(parts[0], &hdr); err != nil || hdr.Alg != "ES256" {
		return fmt.Errorf("JWT header alg %q %v, want ES256", hdr.Alg, err)
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return fmt.Errorf("JWT claims: %w", err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		return errors.New("JWT signature is not 64 bytes")
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pk, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return errors.New("JWT signature does not verify")
	}
	now := time.Now().Unix()
	switch {
	case claims.Aud != s.srv.URL:
		return fmt.Errorf("JWT aud %q, want %q", claims.Aud, s.srv.URL)
	case claims.Exp <= now || claims.Exp > now+24*3600:
		return fmt.Errorf("JWT exp %d is not within 24 h from now", claims.Exp)
	case !strings.HasPrefix(claims.Sub, "mailto:") && !strings.HasPrefix(claims.Sub, "https:"):
		return fmt.Errorf("JWT sub %q is neither a mailto nor an https URL", claims.Sub)
	}
	return nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// decrypt opens an aes128gcm body (RFC 8188 §2) encrypted for the
// subscription (RFC 8291 §3.4): salt, record size, the sender's key as
// key id, then one record.
func decrypt(body []byte, priv *ecdh.PrivateKey, auth []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("body shorter than the aes128gcm header")
	}
	salt, rs, idlen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if idlen != 65 || len(body) < 21+idlen {
		return nil, fmt.Errorf("key id of %d bytes, want the sender's 65-byte key", idlen)
	}
	asPub, record := body[21:21+idlen], body[21+idlen:]
	if uint32(len(record)) > rs {
		return nil, fmt.Errorf("a record of %d bytes exceeds rs %d (one record expected)", len(record), rs)
	}
	as, err := ecdh.P256().NewPublicKey(asPub)
	if err != nil {
		return nil, fmt.Errorf("sender key: %w", err)
	}
	secret, err := priv.ECDH(as)
	if err != nil {
		return nil, err
	}
	info := append(append([]byte("WebPush: info\x00"), priv.PublicKey().Bytes()...), asPub...)
	ikm, err := hkdf.Key(sha256.New, secret, auth, string(info), 32)
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	if err != nil {
		return nil, err
	}
	nonce, err := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, record, nil)
	if err != nil {
		return nil, fmt.Errorf("decrypt: %w", err)
	}
	plain = bytes.TrimRight(plain, "\x00")
	if len(plain) == 0 || plain[len(plain)-1] != 2 {
		return nil, errors.New("the last record lacks the 0x02 delimiter")
	}
	return plain[:len(plain)-1], nil
}
