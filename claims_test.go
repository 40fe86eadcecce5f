package agentbridge

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParseClaimHeader: any header value is either refused with
// invalid_field or parses into a positive id and fence that format back
// into the same claim.
func FuzzParseClaimHeader(f *testing.F) {
	for _, s := range []string{"1:1", "42:7", "", ":", "1:", ":1", "0:1", "1:0", "-1:2", "1:2:3", " 1:2", "9223372036854775807:1", "9223372036854775808:1", "1e3:1", "0x1:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		id, fence, err := ParseClaimHeader(v)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Code != ECodeInvalidField || e.Field != ClaimHeader {
				t.Fatalf("ParseClaimHeader(%q) = %v, want invalid_field", v, err)
			}
			return
		}
		if id <= 0 || fence <= 0 {
			t.Fatalf("ParseClaimHeader(%q) = %d, %d: not positive", v, id, fence)
		}
		if id2, fence2, err := ParseClaimHeader(FormatClaimHeader(id, fence)); err != nil || id2 != id || fence2 != fence {
			t.Fatalf("round trip of %q: %d %d %v", v, id2, fence2, err)
		}
	})
}

// TestClaimRequestValidate: each bad request is refused naming its
// field; a waiting claim gets the default pending ttl.
func TestClaimRequestValidate(t *testing.T) {
	ok := ClaimRequest{ClaimKey: ClaimKey{Thread: "t", Event: "e", Participant: "claude"}, Coordinator: "laptop", Instance: "i", Wait: true}
	if err := ok.Validate(); err != nil || ok.PendingTTLMillis != DefaultPendingTTL.Milliseconds() {
		t.Fatalf("Validate = %v, ttl %d", err, ok.PendingTTLMillis)
	}
	for _, c := range []struct {
		field string
		edit  func(*ClaimRequest)
	}{
		{"event", func(r *ClaimRequest) { r.Event = "" }},
		{"participant", func(r *ClaimRequest) { r.Participant = "" }},
		{"notice", func(r *ClaimRequest) { r.Notice = "party:1" }},
		{"participant", func(r *ClaimRequest) { r.Participant = "no spaces" }},
		{"round", func(r *ClaimRequest) { r.Round = -1 }},
		{"coordinator", func(r *ClaimRequest) { r.Coordinator = "" }},
		{"instance", func(r *ClaimRequest) { r.Instance = "" }},
		{"client", func(r *ClaimRequest) { r.Client = string(make([]byte, MaxClaimText+1)) }},
		{"pending_ttl_ms", func(r *ClaimRequest) { r.PendingTTLMillis = MaxPendingTTL.Milliseconds() + 1 }},
		{"pending_ttl_ms", func(r *ClaimRequest) { r.Wait, r.PendingTTLMillis = false, 5 }},
		{"fallback_from", func(r *ClaimRequest) { r.FallbackFrom = "no spaces" }},
		{"fallback_from", func(r *ClaimRequest) { r.FallbackFrom = "claude" }},
	} {
		r := ClaimRequest{ClaimKey: ClaimKey{Thread: "t", Event: "e", Participant: "claude"}, Coordinator: "laptop", Instance: "i", Wait: true}
		c.edit(&r)
		var e *Error
		if err := r.Validate(); !errors.As(err, &e) || e.Field != c.field {
			t.Errorf("%+v: %v, want an error naming %q", r, err, c.field)
		}
	}
	// The body's key fields sit at its top level.
	b, _ := json.Marshal(ok)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["thread"] != "t" || m["participant"] != "claude" || m["wait"] != true {
		t.Fatalf("ClaimRequest JSON %s", b)
	}
}
