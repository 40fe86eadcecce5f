package fakepush

import (
	"context"
	"net/http"
	"testing"

	"github.com/SherClockHolmes/webpush-go"
)

// TestChecksKeyAndDecrypts: a push from webpush-go is decrypted to its
// payload; one signed by another key than the expected one is refused.
func TestChecksKeyAndDecrypts(t *testing.T) {
	t.Parallel()
	s := Start()
	defer s.Close()
	sub, err := s.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	priv, pub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		t.Fatal(err)
	}
	otherPriv, otherPub, _ := webpush.GenerateVAPIDKeys()
	s.ExpectKey(pub)
	send := func(priv, pub string) int {
		resp, err := webpush.SendNotificationWithContext(context.Background(), []byte(`{"hello":"phone"}`),
			&webpush.Subscription{Endpoint: sub.Endpoint, Keys: webpush.Keys{P256dh: sub.P256dh, Auth: sub.Auth}},
			&webpush.Options{Subscriber: "mailto:test@example.com", TTL: 60, VAPIDPublicKey: pub, VAPIDPrivateKey: priv})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(priv, pub); code != http.StatusCreated {
		t.Fatalf("a good push: %d", code)
	}
	if code := send(otherPriv, otherPub); code != http.StatusForbidden {
		t.Fatalf("a push signed by another key: %d, want 403", code)
	}
	msgs := s.Messages()
	if len(msgs) != 2 || string(msgs[0].Payload) != `{"hello":"phone"}` || msgs[0].TTL != "60" || msgs[1].Err == nil || msgs[1].Payload != nil {
		t.Errorf("messages = %+v", msgs)
	}
}
