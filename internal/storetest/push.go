package storetest

import (
	"context"
	"sync"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// testPush checks the push side of a store: the first key pair stored
// wins for every caller, even racing ones, and subscriptions are stored,
// replaced by endpoint (keeping their outcome), listed and deleted.
func testPush(t *testing.T, newStore Factory) {
	ps, ok := newStore(t, nil).(agentbridge.PushStore)
	if !ok {
		t.Skip("the store keeps no push subscriptions")
	}
	ctx := context.Background()
	got := make([]agentbridge.PushKeys, 4)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			k, err := ps.PushKeys(ctx, agentbridge.PushKeys{Public: "pub" + string(rune('a'+i)), Private: "priv" + string(rune('a'+i))})
			if err != nil {
				t.Error(err)
			}
			got[i] = k
		})
	}
	wg.Wait()
	for _, k := range got {
		if k != got[0] || k.Public == "" || k.Private == "" {
			t.Fatalf("racing PushKeys answered %+v, want one pair for all", got)
		}
	}
	if k, err := ps.PushKeys(ctx, agentbridge.PushKeys{Public: "later", Private: "later"}); err != nil || k != got[0] {
		t.Fatalf("PushKeys later = %+v %v, want the first pair %+v", k, err, got[0])
	}

	sub := agentbridge.PushSubscription{Endpoint: "https://push.example/a", P256dh: "p", Auth: "a", Device: "phone",
		Categories: agentbridge.PushCategories{Permission: true, Threads: []string{"t1"}}}
	if err := ps.PutPushSubscription(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if err := ps.SetPushOutcome(ctx, sub.Endpoint, "delivered", "2026-01-01T00:00:00.000000Z"); err != nil {
		t.Fatal(err)
	}
	sub.Device = "my phone"
	sub.Categories.Question = true
	if err := ps.PutPushSubscription(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if err := ps.PutPushSubscription(ctx, agentbridge.PushSubscription{Endpoint: "https://push.example/b", P256dh: "p", Auth: "a", Device: "laptop"}); err != nil {
		t.Fatal(err)
	}
	list, err := ps.PushSubscriptions(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("PushSubscriptions = %+v %v, want 2", list, err)
	}
	a := list[0]
	if a.Endpoint != sub.Endpoint || a.Device != "my phone" || !a.Categories.Question || !a.Categories.Wants(agentbridge.PushReply, "t1") ||
		a.LastOutcome != "delivered" || a.LastAt == "" || a.CreatedAt == "" {
		t.Errorf("replaced subscription = %+v", a)
	}
	if found, err := ps.DeletePushSubscription(ctx, sub.Endpoint); err != nil || !found {
		t.Fatalf("delete = %v %v", found, err)
	}
	if found, err := ps.DeletePushSubscription(ctx, sub.Endpoint); err != nil || found {
		t.Fatalf("second delete = %v %v, want not found", found, err)
	}
	if err := ps.SetPushOutcome(ctx, sub.Endpoint, "gone", "2026-01-01T00:00:00.000000Z"); err != nil {
		t.Fatalf("outcome of a deleted subscription: %v", err)
	}
	if list, _ := ps.PushSubscriptions(ctx); len(list) != 1 || list[0].Device != "laptop" {
		t.Errorf("after delete: %+v", list)
	}
	if err := ps.PutPushSubscription(ctx, agentbridge.PushSubscription{Endpoint: "https://push.example/c", P256dh: "p", Auth: "a", Device: "phone", TokenID: "tok1"}); err != nil {
		t.Fatal(err)
	}
	if list, _ := ps.PushSubscriptions(ctx); len(list) != 2 || list[1].TokenID != "tok1" {
		t.Errorf("with a token id: %+v", list)
	}
	if err := ps.DeleteTokenPushSubscriptions(ctx, "tok1"); err != nil {
		t.Fatal(err)
	}
	if list, _ := ps.PushSubscriptions(ctx); len(list) != 1 || list[0].Device != "laptop" {
		t.Errorf("after the token's subscriptions went: %+v", list)
	}
}
