package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// NewAttachment is the attachment data would be stored as, of type typ
// and named name.
func NewAttachment(data []byte, name, typ string) agentbridge.Attachment {
	h := agentbridge.NewAttachmentHash()
	_, _ = h.Write(data)
	return agentbridge.Attachment{ID: h.ID(), Name: name, Type: typ, Size: int64(len(data))}
}

// failingReader fails the test that reads it: an upload of stored bytes
// must not read its body.
type failingReader struct{ t *testing.T }

func (r failingReader) Read([]byte) (int, error) {
	r.t.Error("the body of an upload whose bytes are stored was read")
	return 0, errors.New("not to be read")
}

// attachmentStore is newStore's store as an AttachmentStore, or skips t.
func attachmentStore(t *testing.T, newStore Factory) (agentbridge.EventStore, agentbridge.AttachmentStore) {
	s := newStore(t, nil)
	as, ok := s.(agentbridge.AttachmentStore)
	if !ok {
		t.Skip("the store keeps no attachments")
	}
	return s, as
}

// put stores data in thread as of now or fails t.
func put(t *testing.T, as agentbridge.AttachmentStore, thread string, a agentbridge.Attachment, body io.Reader, now time.Time) agentbridge.Attachment {
	t.Helper()
	got, err := as.PutAttachment(context.Background(), thread, a, body, now)
	if err != nil {
		t.Fatalf("put %s in %s: %v", a.Name, thread, err)
	}
	return got
}

// readAll reads attachment id back whole, or fails t.
func readAll(t *testing.T, as agentbridge.AttachmentStore, id string) []byte {
	t.Helper()
	r, found, err := as.OpenAttachment(context.Background(), id)
	if err != nil || !found {
		t.Fatalf("open %s: found %v, %v", id, found, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", id, err)
	}
	return b
}

// withAttachments is a message naming the attachments as meta.attachments.
func withAttachments(from, text string, refs ...any) agentbridge.EventInput {
	in := Msg(from, text)
	b, _ := json.Marshal(refs)
	in.Meta.Extra = map[string]json.RawMessage{agentbridge.MetaAttachments: b}
	return in
}

// testAttachments: an upload is stored by its hash and read back whole
// (several chunks); the same bytes again are not read nor stored again;
// an upload to a missing thread is thread_not_found; the thread it went
// to holds it, and another thread once one of its events names it.
func testAttachments(t *testing.T, newStore Factory) {
	s, as := attachmentStore(t, newStore)
	ctx := context.Background()
	NewThread(t, s, "a")
	NewThread(t, s, "b")
	data := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/32) // 2.5 MiB: three chunks
	a := NewAttachment(data, "big.bin", "application/octet-stream")
	now := time.Now()
	got := put(t, as, "a", a, bytes.NewReader(data), now)
	if got != a {
		t.Errorf("put = %+v, want %+v", got, a)
	}
	if back := readAll(t, as, a.ID); !bytes.Equal(back, data) {
		t.Fatalf("read back %d bytes, want the %d put", len(back), len(data))
	}
	again := a
	again.Name, again.Type = "copy.bin", "image/png" // the stored type wins
	got = put(t, as, "b", again, failingReader{t}, now)
	if got.Type != a.Type || got.Size != a.Size || got.Name != "copy.bin" {
		t.Errorf("second put = %+v, want the stored type and size under the new name", got)
	}
	if stored, found, err := as.Attachment(ctx, a.ID); err != nil || !found || stored.Name != "big.bin" {
		t.Errorf("Attachment = %+v, %v, %v; want the first name kept", stored, found, err)
	}
	if _, err := as.PutAttachment(ctx, "nope", a, bytes.NewReader(data), now); agentbridge.ErrorCode(err) != agentbridge.ECodeThreadNotFound {
		t.Errorf("put to a missing thread: %v, want thread_not_found", err)
	}
	small := []byte("hello")
	b := NewAttachment(small, "hello.txt", "text/plain; charset=utf-8")
	put(t, as, "a", b, bytes.NewReader(small), now)
	NewThread(t, s, "c")
	for _, c := range []struct {
		thread string
		want   bool
	}{{"a", true}, {"b", false}, {"c", false}} {
		if held, err := as.AttachmentHeld(ctx, b.ID, c.thread); err != nil || held != c.want {
			t.Errorf("held by %s = %v, %v; want %v", c.thread, held, err, c.want)
		}
	}
	MustAppend(t, s, "c", withAttachments("user", "see", map[string]any{"id": b.ID}))
	if held, err := as.AttachmentHeld(ctx, b.ID, "c"); err != nil || !held {
		t.Errorf("held by c after an event named it = %v, %v", held, err)
	}
	if _, found, err := as.OpenAttachment(ctx, "sha256:"+fmt.Sprintf("%064x", 0)); err != nil || found {
		t.Errorf("open a missing attachment: found %v, %v", found, err)
	}
	if back := readAll(t, as, b.ID); !bytes.Equal(back, small) {
		t.Errorf("read back %q, want %q", back, small)
	}
}

// testEventAttachments: an event naming an attachment that is not stored
// is refused unknown_attachment and nothing is stored; one naming stored
// ones carries them as stored (the client's type and size replaced, its
// name cleaned, a missing name the stored one), and its retry with the
// same key is the same event; a malformed entry is invalid_field;
// meta.change.diff must name a stored attachment too.
func testEventAttachments(t *testing.T, newStore Factory) {
	s, as := attachmentStore(t, newStore)
	ctx := context.Background()
	NewThread(t, s, "t")
	png := []byte("\x89PNG\r\n\x1a\nnot really")
	a := put(t, as, "t", NewAttachment(png, "shot.png", "image/png"), bytes.NewReader(png), time.Now())
	missing := NewAttachment([]byte("never uploaded"), "x", "text/plain")
	before := len(AllEvents(t, s, "t"))
	_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: withAttachments("user", "see", map[string]any{"id": a.ID}, map[string]any{"id": missing.ID})})
	WantCode(t, err, agentbridge.ECodeUnknownAttachment)
	if n := len(AllEvents(t, s, "t")); n != before {
		t.Fatalf("a refused event was stored: %d events, want %d", n, before)
	}
	_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: withAttachments("user", "see", map[string]any{"id": "shot.png"})})
	WantCode(t, err, agentbridge.ECodeInvalidField)
	change := Msg("claude", "done")
	change.Meta.Extra = map[string]json.RawMessage{"change": json.RawMessage(`{"diff":"` + missing.ID + `"}`)}
	_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: change})
	WantCode(t, err, agentbridge.ECodeUnknownAttachment)

	req := agentbridge.AppendRequest{Thread: "t", IdempotencyKey: "k", Input: withAttachments("user", "see",
		map[string]any{"id": a.ID, "name": "../../etc/shot 2.png", "type": "text/html", "size": 1},
		map[string]any{"id": a.ID})}
	res, err := s.Append(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want := []agentbridge.Attachment{{ID: a.ID, Name: "shot 2.png", Type: a.Type, Size: a.Size}, a}
	for _, ev := range []agentbridge.Event{res.Event, AllEvents(t, s, "t")[before]} {
		var got []agentbridge.Attachment
		if err := json.Unmarshal(ev.Meta.Extra[agentbridge.MetaAttachments], &got); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("meta.attachments = %+v, want %+v", got, want)
		}
	}
	req.Input = withAttachments("user", "see",
		map[string]any{"id": a.ID, "name": "../../etc/shot 2.png", "type": "text/html", "size": 1},
		map[string]any{"id": a.ID})
	replay, err := s.Append(ctx, req)
	if err != nil || !replay.Replayed || replay.Event.ID != res.Event.ID {
		t.Errorf("retry = %+v, %v; want the first event replayed", replay, err)
	}
	diff := []byte("diff --git a/x b/x\n")
	d := put(t, as, "t", NewAttachment(diff, "change.diff", "text/x-diff"), bytes.NewReader(diff), time.Now())
	change.Meta.Extra = map[string]json.RawMessage{"change": json.RawMessage(`{"diff":"` + d.ID + `"}`)}
	MustAppend(t, s, "t", change)
}

// testSweepAttachments: the sweep removes exactly the attachments last
// uploaded before the cutoff that no event names (an upload of the same
// bytes moves the time on); a swept one is gone for reads and appends.
func testSweepAttachments(t *testing.T, newStore Factory) {
	s, as := attachmentStore(t, newStore)
	ctx := context.Background()
	NewThread(t, s, "t")
	now := time.Now()
	old := now.Add(-agentbridge.AttachmentGrace - time.Hour)
	mk := func(name string, at time.Time) agentbridge.Attachment {
		data := []byte("bytes of " + name)
		return put(t, as, "t", NewAttachment(data, name, "text/plain; charset=utf-8"), bytes.NewReader(data), at)
	}
	orphan, named, fresh, again := mk("orphan", old), mk("named", old), mk("fresh", now), mk("again", old)
	MustAppend(t, s, "t", withAttachments("user", "see", map[string]any{"id": named.ID}))
	put(t, as, "t", again, failingReader{t}, now)
	n, err := as.SweepAttachments(ctx, now.Add(-agentbridge.AttachmentGrace))
	if err != nil || n != 1 {
		t.Fatalf("sweep removed %d, %v; want 1", n, err)
	}
	for _, c := range []struct {
		a    agentbridge.Attachment
		kept bool
	}{{orphan, false}, {named, true}, {fresh, true}, {again, true}} {
		if _, found, err := as.Attachment(ctx, c.a.ID); err != nil || found != c.kept {
			t.Errorf("%s after the sweep: found %v, %v; want %v", c.a.Name, found, err, c.kept)
		}
		if _, found, err := as.OpenAttachment(ctx, c.a.ID); err != nil || found != c.kept {
			t.Errorf("open %s after the sweep: found %v, %v; want %v", c.a.Name, found, err, c.kept)
		}
	}
	if held, err := as.AttachmentHeld(ctx, orphan.ID, "t"); err != nil || held {
		t.Errorf("the swept attachment is still held: %v, %v", held, err)
	}
	_, err = s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: withAttachments("user", "late", map[string]any{"id": orphan.ID})})
	WantCode(t, err, agentbridge.ECodeUnknownAttachment)
	if n, err := as.SweepAttachments(ctx, now.Add(-agentbridge.AttachmentGrace)); err != nil || n != 0 {
		t.Errorf("a second sweep removed %d, %v; want 0", n, err)
	}
}

// testSweepRacesAppends runs RaceSweepsAndAppends on one store.
func testSweepRacesAppends(t *testing.T, newStore Factory) {
	s, _ := attachmentStore(t, newStore)
	RaceSweepsAndAppends(t, s)
}

// RaceSweepsAndAppends runs sweeps and appends naming old, unnamed
// attachments at once, spread over stores (one database: several bridges
// on one PostgreSQL): every append either stored its event and its
// attachment stays, or was refused unknown_attachment. Each store must
// be an AttachmentStore; the thread "race" is created in the first.
func RaceSweepsAndAppends(t *testing.T, stores ...agentbridge.EventStore) {
	ctx := context.Background()
	NewThread(t, stores[0], "race")
	at := func(i int) (agentbridge.EventStore, agentbridge.AttachmentStore) {
		s := stores[i%len(stores)]
		return s, s.(agentbridge.AttachmentStore)
	}
	old := time.Now().Add(-2 * agentbridge.AttachmentGrace)
	cutoff := time.Now().Add(-agentbridge.AttachmentGrace)
	const n = 24
	ids := make([]string, n)
	for i := range n {
		data := fmt.Appendf(nil, "file %d", i)
		_, as := at(i)
		ids[i] = put(t, as, "race", NewAttachment(data, "f", "text/plain; charset=utf-8"), bytes.NewReader(data), old).ID
	}
	var wg sync.WaitGroup
	stored := make([]bool, n)
	for i := range n {
		wg.Go(func() {
			s, _ := at(i + 1)
			_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "race", Input: withAttachments("user", "see", map[string]any{"id": ids[i]})})
			switch {
			case err == nil:
				stored[i] = true
			case agentbridge.ErrorCode(err) != agentbridge.ECodeUnknownAttachment:
				t.Error(err)
			}
		})
	}
	for i := range 2 * len(stores) {
		wg.Go(func() {
			_, as := at(i)
			if _, err := as.SweepAttachments(ctx, cutoff); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	_, as := at(0)
	if _, err := as.SweepAttachments(ctx, cutoff); err != nil {
		t.Fatal(err)
	}
	kept := 0
	for i, id := range ids {
		_, found, err := as.Attachment(ctx, id)
		if err != nil || found != stored[i] {
			t.Errorf("attachment %d: found %v, %v; its append stored: %v", i, found, err, stored[i])
		}
		if found {
			kept++
		}
	}
	t.Logf("%d of %d appends came before the sweep of their attachment", kept, n)
}

// cutReader gives the first n bytes of data, then fails.
type cutReader struct {
	data []byte
	n    int
}

func (r *cutReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("the client went away")
	}
	k := copy(p, r.data[:min(r.n, len(r.data))])
	r.data, r.n = r.data[k:], r.n-k
	return k, nil
}

// testAttachmentCutShort: an upload whose body fails part-way stores
// nothing a reader, an append or a sweep sees; the same bytes uploaded
// whole afterwards are stored and read back.
func testAttachmentCutShort(t *testing.T, newStore Factory) {
	s, as := attachmentStore(t, newStore)
	ctx := context.Background()
	NewThread(t, s, "t")
	data := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB: several chunks
	a := NewAttachment(data, "cut.bin", "application/octet-stream")
	if _, err := as.PutAttachment(ctx, "t", a, &cutReader{data: data, n: 1_500_000}, time.Now()); err == nil {
		t.Fatal("an upload cut short was stored")
	}
	if _, found, err := as.Attachment(ctx, a.ID); err != nil || found {
		t.Fatalf("after the cut: found %v, %v", found, err)
	}
	_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: withAttachments("user", "see", map[string]any{"id": a.ID})})
	WantCode(t, err, agentbridge.ECodeUnknownAttachment)
	if _, err := as.SweepAttachments(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	put(t, as, "t", a, bytes.NewReader(data), time.Now())
	if back := readAll(t, as, a.ID); !bytes.Equal(back, data) {
		t.Fatalf("read back %d bytes, want %d", len(back), len(data))
	}
}
