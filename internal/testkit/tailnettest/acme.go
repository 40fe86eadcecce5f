package tailnettest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"

	"tailscale.com/tailcfg"
)

// acmeServer is a certificate authority speaking ACME (RFC 8555) over
// HTTP, small but honest: every POST is a JWS whose signature is checked
// against the account's key and whose nonce is used once, and a dns-01
// challenge is valid only when the TXT record the node asked control to
// publish (testcontrol's OnSetDNS hands it to setTXT) is the key
// authorization of the challenge's token. It issues a certificate signed by
// its own root for the name the order and the CSR both give. It is what
// Let's Encrypt is to a real tailnet node, so that the node's production
// path (account, order, SetDNS through control, finalize, the cert store)
// runs unchanged, pointed here by TS_DEBUG_ACME_DIRECTORY_URL.
type acmeServer struct {
	base    string // the server's URL, set once it listens
	root    *x509.Certificate
	rootKey *ecdsa.PrivateKey

	mu       sync.Mutex
	nonces   map[string]bool
	accounts map[string]*acmeAccount // by URL
	orders   map[string]*acmeOrder   // by id
	txt      map[string]string       // "_acme-challenge.NAME" → value
	issued   []string                // the names certified, in order
	seq      int
}

type acmeAccount struct {
	url        string
	key        *ecdsa.PublicKey
	thumbprint string
}

type acmeOrder struct {
	id      string
	account string
	name    string
	token   string
	status  string // pending, ready, valid, invalid
	cert    []byte // PEM chain, once valid
}

// newACMEServer makes the CA's root.
func newACMEServer() (*acmeServer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "agent-bridge test ACME root"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	root, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &acmeServer{root: root, rootKey: key, nonces: map[string]bool{}, accounts: map[string]*acmeAccount{},
		orders: map[string]*acmeOrder{}, txt: map[string]string{}}, nil
}

// rootPEM is the CA's root certificate, which clients of the issued
// certificates trust.
func (a *acmeServer) rootPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.root.Raw})
}

// setTXT is testcontrol's OnSetDNS: the node publishes a dns-01 answer.
func (a *acmeServer) setTXT(req *tailcfg.SetDNSRequest) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.txt[strings.TrimSuffix(req.Name, ".")] = req.Value
	return nil
}

// Issued lists the names the CA has certified.
func (a *acmeServer) Issued() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.issued...)
}

// acmeProblem is an RFC 8555 error document.
type acmeProblem struct {
	Type   string `json:"type"`
	Detail string `json:"detail"`
	Status int    `json:"status"`
}

func (p *acmeProblem) Error() string { return p.Type + ": " + p.Detail }

func problem(status int, typ, format string, args ...any) *acmeProblem {
	return &acmeProblem{Type: "urn:ietf:params:acme:error:" + typ, Detail: fmt.Sprintf(format, args...), Status: status}
}

// ServeHTTP routes the ACME resources: /directory, /nonce, /account,
// /order, /order/ID, /authz/ID, /chal/ID, /finalize/ID, /cert/ID.
func (a *acmeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Replay-Nonce", a.newNonce())
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case r.URL.Path == "/directory":
		writeJSON(w, http.StatusOK, map[string]string{
			"newNonce": a.base + "/nonce", "newAccount": a.base + "/account", "newOrder": a.base + "/order",
			"revokeCert": a.base + "/revoke", "keyChange": a.base + "/key-change",
		})
	case r.URL.Path == "/nonce":
		w.WriteHeader(http.StatusOK)
	case r.Method != http.MethodPost:
		writeProblem(w, problem(http.StatusMethodNotAllowed, "malformed", "ACME resources take POST"))
	default:
		if err := a.post(w, r); err != nil {
			var p *acmeProblem
			if !errors.As(err, &p) {
				p = problem(http.StatusInternalServerError, "serverInternal", "%v", err)
			}
			writeProblem(w, p)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeProblem(w http.ResponseWriter, p *acmeProblem) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

func (a *acmeServer) newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	n := base64.RawURLEncoding.EncodeToString(b)
	a.mu.Lock()
	a.nonces[n] = true
	a.mu.Unlock()
	return n
}

// jws is a flattened JWS (RFC 7515) as ACME sends it.
type jws struct {
	Protected string `json:"protected"`
	Payload   string `json:"payload"`
	Signature string `json:"signature"`
}

type jwsHeader struct {
	Alg   string          `json:"alg"`
	Nonce string          `json:"nonce"`
	URL   string          `json:"url"`
	KID   string          `json:"kid"`
	JWK   json.RawMessage `json:"jwk"`
}

type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// verified is a POST whose signature, nonce and URL were checked.
type verified struct {
	header  jwsHeader
	payload []byte
	account *acmeAccount // nil for a new account (a jwk, not a kid)
	key     *ecdsa.PublicKey
}

// verify checks a POST's JWS: ES256, a nonce this server gave and not yet
// used, the URL it was sent to, and a signature by the account's key (kid)
// or by the key it carries (jwk, newAccount only).
func (a *acmeServer) verify(r *http.Request) (*verified, error) {
	var msg jws
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20)).Decode(&msg); err != nil {
		return nil, problem(http.StatusBadRequest, "malformed", "not a JWS: %v", err)
	}
	hb, err := base64.RawURLEncoding.DecodeString(msg.Protected)
	if err != nil {
		return nil, problem(http.StatusBadRequest, "malformed", "protected header: %v", err)
	}
	var v verified
	if err := json.Unmarshal(hb, &v.header); err != nil {
		return nil, problem(http.StatusBadRequest, "malformed", "protected header: %v", err)
	}
	if v.header.Alg != "ES256" {
		return nil, problem(http.StatusBadRequest, "badSignatureAlgorithm", "only ES256, not %q", v.header.Alg)
	}
	a.mu.Lock()
	fresh := a.nonces[v.header.Nonce]
	delete(a.nonces, v.header.Nonce)
	switch {
	case v.header.KID != "":
		v.account = a.accounts[v.header.KID]
		if v.account != nil {
			v.key = v.account.key
		}
	case len(v.header.JWK) > 0:
		v.key, err = parseJWK(v.header.JWK)
	}
	a.mu.Unlock()
	if !fresh {
		return nil, problem(http.StatusBadRequest, "badNonce", "nonce %q is not one of this server's, or was used", v.header.Nonce)
	}
	if v.header.URL != a.base+r.URL.Path {
		return nil, problem(http.StatusBadRequest, "unauthorized", "the JWS names %q, not %q", v.header.URL, a.base+r.URL.Path)
	}
	if err != nil || v.key == nil {
		return nil, problem(http.StatusBadRequest, "accountDoesNotExist", "no such account or key")
	}
	sig, err := base64.RawURLEncoding.DecodeString(msg.Signature)
	if err != nil || len(sig) != 64 {
		return nil, problem(http.StatusBadRequest, "malformed", "the signature is not 64 bytes of ES256")
	}
	digest := sha256.Sum256([]byte(msg.Protected + "." + msg.Payload))
	rs, ss := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(v.key, digest[:], rs, ss) {
		return nil, problem(http.StatusUnauthorized, "unauthorized", "the signature does not verify")
	}
	if v.payload, err = base64.RawURLEncoding.DecodeString(msg.Payload); err != nil {
		return nil, problem(http.StatusBadRequest, "malformed", "payload: %v", err)
	}
	return &v, nil
}

func parseJWK(raw json.RawMessage) (*ecdsa.PublicKey, error) {
	var k jwk
	if err := json.Unmarshal(raw, &k); err != nil {
		return nil, err
	}
	if k.Kty != "EC" || k.Crv != "P-256" {
		return nil, fmt.Errorf("key %s %s: only EC P-256", k.Kty, k.Crv)
	}
	x, err1 := base64.RawURLEncoding.DecodeString(k.X)
	y, err2 := base64.RawURLEncoding.DecodeString(k.Y)
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	if len(x) != 32 || len(y) != 32 {
		return nil, fmt.Errorf("key coordinates of %d and %d bytes, want 32 (RFC 7518)", len(x), len(y))
	}
	// The uncompressed point: 0x04, then X, then Y.
	return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
}

// thumbprint is the key's JWK thumbprint (RFC 7638), the second half of a
// key authorization.
func thumbprint(k *ecdsa.PublicKey) (string, error) {
	point, err := k.Bytes()
	if err != nil || len(point) != 65 {
		return "", fmt.Errorf("thumbprint of a key that is not a P-256 point: %v", err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	canon := fmt.Sprintf(`{"crv":"P-256","kty":"EC","x":"%s","y":"%s"}`, enc(point[1:33]), enc(point[33:]))
	sum := sha256.Sum256([]byte(canon))
	return enc(sum[:]), nil
}

// post serves an authenticated resource.
func (a *acmeServer) post(w http.ResponseWriter, r *http.Request) error {
	v, err := a.verify(r)
	if err != nil {
		return err
	}
	if r.URL.Path == "/account" {
		return a.account(w, v)
	}
	if v.account == nil {
		return problem(http.StatusUnauthorized, "accountDoesNotExist", "sign with the account's kid")
	}
	kind, id, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if kind == "order" && id == "" {
		return a.newOrder(w, v)
	}
	a.mu.Lock()
	o := a.orders[id]
	a.mu.Unlock()
	if o == nil || o.account != v.account.url {
		return problem(http.StatusNotFound, "malformed", "no such %s", kind)
	}
	switch kind {
	case "order":
		a.writeOrder(w, http.StatusOK, o)
	case "authz":
		a.writeAuthz(w, o)
	case "chal":
		return a.challenge(w, o, v.account)
	case "finalize":
		return a.finalize(w, v, o)
	case "cert":
		a.mu.Lock()
		cert := o.cert
		a.mu.Unlock()
		if cert == nil {
			return problem(http.StatusNotFound, "malformed", "the order has no certificate yet")
		}
		w.Header().Set("Content-Type", "application/pem-certificate-chain")
		_, _ = w.Write(cert)
	default:
		return problem(http.StatusNotFound, "malformed", "no resource %s", r.URL.Path)
	}
	return nil
}

// account is newAccount: onlyReturnExisting looks the key up, else the
// account is made (201) or found (200).
func (a *acmeServer) account(w http.ResponseWriter, v *verified) error {
	var req struct {
		OnlyReturnExisting bool `json:"onlyReturnExisting"`
	}
	if len(v.payload) > 0 {
		if err := json.Unmarshal(v.payload, &req); err != nil {
			return problem(http.StatusBadRequest, "malformed", "account: %v", err)
		}
	}
	tp, err := thumbprint(v.key)
	if err != nil {
		return problem(http.StatusBadRequest, "badPublicKey", "%v", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	status := http.StatusOK
	acct := a.accounts[a.base+"/acct/"+tp]
	if acct == nil {
		if req.OnlyReturnExisting {
			return problem(http.StatusBadRequest, "accountDoesNotExist", "no account has this key")
		}
		acct = &acmeAccount{url: a.base + "/acct/" + tp, key: v.key, thumbprint: tp}
		a.accounts[acct.url] = acct
		status = http.StatusCreated
	}
	w.Header().Set("Location", acct.url)
	writeJSON(w, status, map[string]any{"status": "valid"})
	return nil
}

func (a *acmeServer) newOrder(w http.ResponseWriter, v *verified) error {
	var req struct {
		Identifiers []struct{ Type, Value string } `json:"identifiers"`
	}
	if err := json.Unmarshal(v.payload, &req); err != nil {
		return problem(http.StatusBadRequest, "malformed", "order: %v", err)
	}
	if len(req.Identifiers) != 1 || req.Identifiers[0].Type != "dns" || strings.HasPrefix(req.Identifiers[0].Value, "*.") {
		return problem(http.StatusBadRequest, "rejectedIdentifier", "one dns name per order, no wildcard")
	}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	a.mu.Lock()
	a.seq++
	o := &acmeOrder{id: fmt.Sprint(a.seq), account: v.account.url, name: req.Identifiers[0].Value,
		token: base64.RawURLEncoding.EncodeToString(tok), status: "pending"}
	a.orders[o.id] = o
	a.mu.Unlock()
	a.writeOrder(w, http.StatusCreated, o)
	return nil
}

func (a *acmeServer) writeOrder(w http.ResponseWriter, status int, o *acmeOrder) {
	a.mu.Lock()
	body := map[string]any{
		"status":         o.status,
		"identifiers":    []map[string]string{{"type": "dns", "value": o.name}},
		"authorizations": []string{a.base + "/authz/" + o.id},
		"finalize":       a.base + "/finalize/" + o.id,
	}
	if o.cert != nil {
		body["certificate"] = a.base + "/cert/" + o.id
	}
	a.mu.Unlock()
	w.Header().Set("Location", a.base+"/order/"+o.id)
	writeJSON(w, status, body)
}

// challengeDoc is the dns-01 challenge of o's authorization.
func (a *acmeServer) challengeDoc(o *acmeOrder) map[string]string {
	st := "pending"
	if o.status != "pending" {
		st = "valid"
	}
	return map[string]string{"type": "dns-01", "url": a.base + "/chal/" + o.id, "token": o.token, "status": st}
}

func (a *acmeServer) writeAuthz(w http.ResponseWriter, o *acmeOrder) {
	a.mu.Lock()
	ch := a.challengeDoc(o)
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"status":     ch["status"],
		"identifier": map[string]string{"type": "dns", "value": o.name},
		"challenges": []map[string]string{ch},
	})
}

// challenge validates dns-01: the TXT record control was asked to publish
// must be base64url(SHA-256(token "." thumbprint)).
func (a *acmeServer) challenge(w http.ResponseWriter, o *acmeOrder, acct *acmeAccount) error {
	sum := sha256.Sum256([]byte(o.token + "." + acct.thumbprint))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	a.mu.Lock()
	got := a.txt["_acme-challenge."+o.name]
	if o.status == "pending" {
		if got != want {
			a.mu.Unlock()
			return problem(http.StatusForbidden, "unauthorized", "TXT _acme-challenge.%s is %q, not the key authorization's digest", o.name, got)
		}
		o.status = "ready"
	}
	ch := a.challengeDoc(o)
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, ch)
	return nil
}

// finalize issues the certificate for a ready order whose CSR names
// exactly the order's name.
func (a *acmeServer) finalize(w http.ResponseWriter, v *verified, o *acmeOrder) error {
	var req struct {
		CSR string `json:"csr"`
	}
	if err := json.Unmarshal(v.payload, &req); err != nil {
		return problem(http.StatusBadRequest, "malformed", "finalize: %v", err)
	}
	der, err := base64.RawURLEncoding.DecodeString(req.CSR)
	if err != nil {
		return problem(http.StatusBadRequest, "badCSR", "%v", err)
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err == nil {
		err = csr.CheckSignature()
	}
	if err != nil {
		return problem(http.StatusBadRequest, "badCSR", "%v", err)
	}
	if len(csr.DNSNames) != 1 || csr.DNSNames[0] != o.name {
		return problem(http.StatusBadRequest, "badCSR", "the CSR names %v, the order %s", csr.DNSNames, o.name)
	}
	a.mu.Lock()
	status := o.status
	a.mu.Unlock()
	if status != "ready" {
		return problem(http.StatusForbidden, "orderNotReady", "the order is %s", status)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: o.name},
		DNSNames:     []string{o.name},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(12 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	cert, err := x509.CreateCertificate(rand.Reader, tmpl, a.root, csr.PublicKey, a.rootKey)
	if err != nil {
		return err
	}
	a.mu.Lock()
	o.cert = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert}), a.rootPEM()...)
	o.status = "valid"
	a.issued = append(a.issued, o.name)
	a.mu.Unlock()
	a.writeOrder(w, http.StatusOK, o)
	return nil
}
