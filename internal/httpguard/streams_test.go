package httpguard

import (
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TestReservedStreamsPerCoordinator: with every shared slot held, the
// slots kept for coordinators are shared among coordinator tokens, at most
// ReservedStreamsPerCoordinator each, so that one coordinator cannot take
// the whole pool from the coordinators of other machines; other tokens
// get none of them; a coordinator's stream takes a shared slot while one
// is free; a released kept slot is that coordinator's again.
func TestReservedStreamsPerCoordinator(t *testing.T) {
	t.Parallel()
	g, err := New(Options{MaxStreams: 40, CoordinatorStreams: 10, ReservedStreamsPerCoordinator: 4})
	if err != nil {
		t.Fatal(err)
	}
	take := func(cred Credential) (func(), error) {
		t.Helper()
		release, err := g.Stream(WithCredential(t.Context(), cred))
		if err == nil {
			t.Cleanup(release)
		}
		return release, err
	}
	coordinator := func(id string) Credential {
		return Credential{ID: id, Name: id, Scope: agentbridge.ScopeCoordinator}
	}
	laptop, desktop, server := coordinator("laptop"), coordinator("desktop"), coordinator("server")
	// The laptop's coordinator opens 5 streams while the shared pool has
	// room: none of them is a kept slot.
	for i := range 5 {
		if _, err := take(laptop); err != nil {
			t.Fatalf("laptop stream %d in the shared pool: %v", i+1, err)
		}
	}
	for i := range 25 {
		if _, err := take(Credential{ID: "reader", Scope: agentbridge.ScopeRead}); err != nil {
			t.Fatalf("reader stream %d: %v", i+1, err)
		}
	}
	if _, err := take(Credential{ID: "reader2", Scope: agentbridge.ScopeRead}); agentbridge.ErrorCode(err) != agentbridge.ECodeTooManyStreams {
		t.Fatalf("a read token's stream into the kept slots: %v, want too_many_streams", err)
	}
	var laptopReleases []func()
	for i := range 4 {
		release, err := take(laptop)
		if err != nil {
			t.Fatalf("laptop kept slot %d: %v", i+1, err)
		}
		laptopReleases = append(laptopReleases, release)
	}
	if _, err := take(laptop); agentbridge.ErrorCode(err) != agentbridge.ECodeTooManyStreams {
		t.Fatalf("a 5th kept slot for one coordinator: %v, want too_many_streams", err)
	}
	for i := range 4 {
		if _, err := take(desktop); err != nil {
			t.Fatalf("desktop kept slot %d with the laptop's share taken: %v", i+1, err)
		}
	}
	if _, err := take(server); err != nil {
		t.Fatalf("server kept slot 1: %v", err)
	}
	if _, err := take(server); err != nil {
		t.Fatalf("server kept slot 2: %v", err)
	}
	if _, err := take(server); agentbridge.ErrorCode(err) != agentbridge.ECodeTooManyStreams {
		t.Fatalf("a stream over the server's cap of 40: %v, want too_many_streams", err)
	}
	laptopReleases[0]()
	laptopReleases[0]() // a second release gives nothing back twice
	if _, err := take(server); err != nil {
		t.Fatalf("server stream into the slot the laptop gave back: %v", err)
	}
	if _, err := take(laptop); agentbridge.ErrorCode(err) != agentbridge.ECodeTooManyStreams {
		t.Fatalf("laptop stream with the pool full: %v, want too_many_streams", err)
	}
}
