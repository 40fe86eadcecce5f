package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// testPush checks the push side of a store: the first key pair stored
// wins for every caller, even racing ones, and subscriptions are stored,
// replaced by endpoint (keeping their outcome), listed and deleted; their
// deliveries are kept (testPushDeliveries) and their caps hold
// (testPushCaps).
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
	if err := ps.PutPushSubscription(ctx, sub, agentbridge.PushLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := ps.RecordPushDelivery(ctx, agentbridge.PushDelivery{Endpoint: sub.Endpoint, Device: "phone", Thread: "t1", Event: "e1",
		Category: agentbridge.PushPermission, Outcome: agentbridge.PushSent, Status: 201, At: "2026-01-01T00:00:00.000000Z"}); err != nil {
		t.Fatal(err)
	}
	sub.Device = "my phone"
	sub.Categories.Question = true
	if err := ps.PutPushSubscription(ctx, sub, agentbridge.PushLimits{}); err != nil {
		t.Fatal(err)
	}
	if err := ps.PutPushSubscription(ctx, agentbridge.PushSubscription{Endpoint: "https://push.example/b", P256dh: "p", Auth: "a", Device: "laptop"}, agentbridge.PushLimits{}); err != nil {
		t.Fatal(err)
	}
	list, err := ps.PushSubscriptions(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("PushSubscriptions = %+v %v, want 2", list, err)
	}
	a := list[0]
	if a.Endpoint != sub.Endpoint || a.Device != "my phone" || !a.Categories.Question || !a.Categories.Wants(agentbridge.PushReply, "t1") ||
		a.LastOutcome != agentbridge.PushSent || a.LastAt == "" || a.CreatedAt == "" {
		t.Errorf("replaced subscription = %+v", a)
	}
	if found, err := ps.DeletePushSubscription(ctx, sub.Endpoint); err != nil || !found {
		t.Fatalf("delete = %v %v", found, err)
	}
	if found, err := ps.DeletePushSubscription(ctx, sub.Endpoint); err != nil || found {
		t.Fatalf("second delete = %v %v, want not found", found, err)
	}
	if err := ps.RecordPushDelivery(ctx, agentbridge.PushDelivery{Endpoint: sub.Endpoint, Device: "phone", Thread: "t1", Event: "e2",
		Category: agentbridge.PushPermission, Outcome: agentbridge.PushExpired, Status: 410, At: "2026-01-01T00:00:01.000000Z"}); err != nil {
		t.Fatalf("outcome of a deleted subscription: %v", err)
	}
	if list, _ := ps.PushSubscriptions(ctx); len(list) != 1 || list[0].Device != "laptop" {
		t.Errorf("after delete: %+v", list)
	}
	if err := ps.PutPushSubscription(ctx, agentbridge.PushSubscription{Endpoint: "https://push.example/c", P256dh: "p", Auth: "a", Device: "phone", TokenID: "tok1"}, agentbridge.PushLimits{}); err != nil {
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

// testPushDeliveries checks the deliveries a store keeps: the newest
// MaxPushDeliveries per device (its token, else its endpoint), newest
// first, whether its subscription is still stored or not.
func testPushDeliveries(t *testing.T, newStore Factory) {
	ps, ok := newStore(t, nil).(agentbridge.PushStore)
	if !ok {
		t.Skip("the store keeps no push subscriptions")
	}
	ctx := context.Background()
	if list, err := ps.PushDeliveries(ctx); err != nil || len(list) != 0 {
		t.Fatalf("PushDeliveries of a new store = %+v %v", list, err)
	}
	phone := agentbridge.PushDelivery{Endpoint: "https://push.example/p", TokenID: "tok1", Device: "phone", Thread: "t1",
		Category: agentbridge.PushQuestion, Outcome: agentbridge.PushSent, Status: 201, LatencyMS: 3}
	laptop := agentbridge.PushDelivery{Endpoint: "https://push.example/l", Device: "laptop", Thread: "t1",
		Category: agentbridge.PushFailed, Outcome: agentbridge.PushFailedPfx + "500", Status: 500}
	for i := range agentbridge.MaxPushDeliveries + 20 {
		phone.Event, phone.At = fmt.Sprintf("e%03d", i), fmt.Sprintf("2026-01-01T00:%02d:%02d.000000Z", i/60, i%60)
		if i == agentbridge.MaxPushDeliveries+19 {
			phone.Outcome, phone.Status = agentbridge.PushExpired, 410
		}
		if err := ps.RecordPushDelivery(ctx, phone); err != nil {
			t.Fatal(err)
		}
		if i%40 == 0 {
			laptop.Event, laptop.At = phone.Event, phone.At
			if err := ps.RecordPushDelivery(ctx, laptop); err != nil {
				t.Fatal(err)
			}
		}
	}
	list, err := ps.PushDeliveries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string][]agentbridge.PushDelivery{}
	for _, d := range list {
		byKey[d.DeviceKey()] = append(byKey[d.DeviceKey()], d)
	}
	p, l := byKey[phone.DeviceKey()], byKey[laptop.DeviceKey()]
	if len(p) != agentbridge.MaxPushDeliveries || p[0].Event != "e119" || p[0].Outcome != agentbridge.PushExpired || p[0].Status != 410 ||
		p[len(p)-1].Event != "e020" || p[0].TokenID != "tok1" || p[0].Endpoint != phone.Endpoint || p[0].LatencyMS != 3 {
		t.Errorf("the phone's deliveries: %d, newest %+v, oldest %+v; want the newest 100, e119 (expired) to e020", len(p), p[0], p[len(p)-1])
	}
	if len(l) != 3 || l[0].Event != "e080" || l[0].Outcome != "failed: 500" || l[0].Device != "laptop" || l[0].Category != agentbridge.PushFailed {
		t.Errorf("the laptop's deliveries: %+v", l)
	}
}

// testPushCaps checks that a store's cap on subscriptions holds when
// subscriptions race: 3 devices (tokens) send 15 new endpoints each at
// once under caps of 10 per device and 25 in all; 25 are stored, none
// past 10 for a device, the others refused with too_many, and a
// replacement at the cap is taken.
func testPushCaps(t *testing.T, newStore Factory) {
	ps, ok := newStore(t, nil).(agentbridge.PushStore)
	if !ok {
		t.Skip("the store keeps no push subscriptions")
	}
	ctx := context.Background()
	limits := agentbridge.PushLimits{PerDevice: 10, Total: 25}
	var mu sync.Mutex
	refused := 0
	var wg sync.WaitGroup
	for d := range 3 {
		for i := range 15 {
			wg.Go(func() {
				sub := agentbridge.PushSubscription{Endpoint: fmt.Sprintf("https://push.example/%d/%d", d, i), P256dh: "p", Auth: "a",
					Device: "browser", TokenID: fmt.Sprintf("tok%d", d)}
				err := ps.PutPushSubscription(ctx, sub, limits)
				if agentbridge.ErrorCode(err) == agentbridge.ECodeTooMany {
					mu.Lock()
					refused++
					mu.Unlock()
				} else if err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	list, err := ps.PushSubscriptions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, s := range list {
		per[s.TokenID]++
	}
	if len(list) != 25 || refused != 20 || per["tok0"] > 10 || per["tok1"] > 10 || per["tok2"] > 10 {
		t.Errorf("%d stored (per device %v), %d refused; want 25, none past 10, 20 refused", len(list), per, refused)
	}
	if err := ps.PutPushSubscription(ctx, list[0], limits); err != nil {
		t.Errorf("a replacement at the cap: %v", err)
	}
}
