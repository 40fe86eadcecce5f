package notify

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// A Web Push endpoint is a URL the person's browser hands the bridge, so
// whoever holds a person token chooses where the bridge sends a POST. It
// must therefore reach a push service on the internet and nothing inside
// the network (contract 8.3): https only, no redirect followed, and the
// address dialed public, checked when connecting, after DNS, so a name
// that resolves to a private address (DNS rebinding included) is refused
// as surely as the address itself. AllowPrivateEndpoints (the bridge
// config's notify.allow_private_endpoints) lifts the address rule and lets
// plain http reach a loopback host, for the project's fake push service in
// tests.

// errNotPublic is the dialer's refusal of an address that is not public.
var errNotPublic = errors.New("the push endpoint's address is not a public one")

// nonPublic are the prefixes an endpoint may not reach: this network,
// private, shared (CGNAT), loopback, link-local, the IETF's and
// documentation ranges, benchmarking, reserved, multicast, broadcast, and
// their IPv6 kin (unique local, link-local, site-local, NAT64's
// well-known prefix, which may embed any IPv4 address, documentation).
var nonPublic = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
		"203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001:db8::/32", "fc00::/7", "fe80::/10",
		"fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Public reports whether a is an address a push endpoint may be dialed
// at: a global unicast address outside every range of nonPublic. An
// IPv4-mapped IPv6 address is judged as its IPv4 address.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || !a.IsGlobalUnicast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}

// CheckEndpoint applies the endpoint rules that need no DNS to a
// subscription's endpoint (already checked by PushSubscription.Validate):
// https, and an address written in the URL public; a name is checked
// when it is dialed. allowPrivate is the bridge config's
// notify.allow_private_endpoints. The error names the field.
func CheckEndpoint(endpoint string, allowPrivate bool) error {
	u, err := url.Parse(endpoint)
	if err != nil {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "endpoint", "The push endpoint is not a URL.")
	}
	if allowPrivate {
		return nil
	}
	if u.Scheme != "https" {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "endpoint",
			"The push endpoint must be an https URL: a push service is reached over TLS.")
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil && !Public(a) {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "endpoint",
			"The push endpoint's address %s is not public (loopback, private, link-local, shared or multicast); a push service is on the internet.", a)
	}
	return nil
}

// pushClient is the HTTP client Web Push is sent with: a dialer that
// refuses any address but a public one (unless allowPrivate), no proxy
// (the address checked must be the endpoint's own), no redirect
// followed (a 3xx is the push service's answer), and timeout for the
// whole request.
func pushClient(allowPrivate bool, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !Public(ap.Addr()) {
				return fmt.Errorf("dial %s: %w", address, errNotPublic)
			}
			return nil
		}
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:           d.DialContext,
			ForceAttemptHTTP2:     true,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
