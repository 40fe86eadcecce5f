package notify

import (
	"net/netip"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestPublic: the addresses a push endpoint may be dialed at, and those
// inside a network it may not (contract 8.3).
func TestPublic(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr   string
		public bool
	}{
		{"142.250.74.46", true}, {"8.8.8.8", true}, {"2a00:1450:4001:80b::200a", true}, {"203.0.114.1", true},
		{"100.63.255.255", true}, {"100.128.0.0", true}, {"172.32.0.1", true},
		{"127.0.0.1", false}, {"127.9.9.9", false}, {"::1", false}, {"0.0.0.0", false}, {"::", false},
		{"10.0.0.1", false}, {"172.16.0.1", false}, {"172.31.255.255", false}, {"192.168.1.1", false},
		{"100.64.0.1", false}, {"100.127.255.254", false}, {"169.254.169.254", false}, {"fe80::1", false},
		{"fd7a:115c:a1e0::1", false}, {"fc00::1", false}, {"224.0.0.251", false}, {"239.255.255.250", false},
		{"ff02::1", false}, {"255.255.255.255", false}, {"240.0.0.1", false}, {"192.0.2.1", false},
		{"198.18.0.1", false}, {"::ffff:10.0.0.1", false}, {"::ffff:127.0.0.1", false}, {"::ffff:8.8.8.8", true},
		{"64:ff9b::a00:1", false}, {"2001:db8::1", false}, {"fec0::1", false},
	} {
		if got := Public(netip.MustParseAddr(c.addr)); got != c.public {
			t.Errorf("Public(%s) = %v, want %v", c.addr, got, c.public)
		}
	}
}

// TestCheckEndpoint: what POST /push/subscriptions refuses before any DNS:
// anything but https, and an address written in the URL that is not
// public; with private endpoints allowed, neither.
func TestCheckEndpoint(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		endpoint        string
		ok, okIfPrivate bool
	}{
		{"https://fcm.googleapis.com/fcm/send/x", true, true},
		{"https://142.250.74.46/x", true, true},
		{"https://localhost:8443/x", true, true}, // a name: checked when dialed
		{"http://fcm.googleapis.com/x", false, true},
		{"http://127.0.0.1:9/x", false, true},
		{"https://127.0.0.1/x", false, true},
		{"https://[::1]:443/x", false, true},
		{"https://169.254.169.254/latest/meta-data/", false, true},
		{"https://10.0.0.1/x", false, true},
		{"https://100.100.100.100/x", false, true},
		{"https://[::ffff:192.168.0.1]/x", false, true},
	} {
		if err := CheckEndpoint(c.endpoint, false); (err == nil) != c.ok {
			t.Errorf("CheckEndpoint(%s) = %v, want ok %v", c.endpoint, err, c.ok)
		} else if err != nil && agentbridge.ErrorCode(err) != agentbridge.ECodeInvalidField {
			t.Errorf("CheckEndpoint(%s) = %v, want invalid_field", c.endpoint, err)
		}
		if err := CheckEndpoint(c.endpoint, true); (err == nil) != c.okIfPrivate {
			t.Errorf("CheckEndpoint(%s, private allowed) = %v, want ok %v", c.endpoint, err, c.okIfPrivate)
		}
	}
}

// TestByDeviceTurns: a note's endpoints start with every device's first,
// then every device's second, each device's in their order.
func TestByDeviceTurns(t *testing.T) {
	t.Parallel()
	sub := func(ep, token, device string) agentbridge.PushSubscription {
		return agentbridge.PushSubscription{Endpoint: ep, TokenID: token, Device: device}
	}
	subs := []agentbridge.PushSubscription{
		sub("a1", "A", "x"), sub("a2", "A", "y"), sub("a3", "A", "x"), sub("b1", "B", "x"),
		sub("o1", "", "laptop"), sub("o2", "", "laptop"), sub("p1", "", "phone"),
	}
	var got []string
	for _, s := range byDeviceTurns(subs) {
		got = append(got, s.Endpoint)
	}
	want := []string{"a1", "b1", "o1", "p1", "a2", "o2", "a3"}
	if len(got) != len(want) {
		t.Fatalf("byDeviceTurns = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("byDeviceTurns = %v, want %v", got, want)
		}
	}
}
