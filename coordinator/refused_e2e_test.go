package coordinator_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testbridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// newStackMaxBody is newStack with a bridge that refuses request bodies
// over maxBody bytes.
func newStackMaxBody(t *testing.T, maxBody int64) *stack {
	t.Helper()
	ensureFake(t)
	t.Cleanup(testutil.CheckGoroutines(t))
	dir := t.TempDir()
	s := &stack{t: t, dir: dir, fakeDir: filepath.Join(dir, "fake")}
	if err := os.MkdirAll(s.fakeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	s.bridge = testbridge.NewMaxBody(t, "", maxBody)
	s.cl = client.New(s.bridge.URL())
	s.cfg = testConfig(s.bridge.URL())
	s.cfg.MaxReplyChars = config.MaxReplyCharsLimit
	t.Cleanup(func() {
		s.stopCoordinator()
		s.bridge.Stop()
	})
	s.startCoordinator()
	return s
}

// waitReceipt waits until the pair's receipt is in state want and returns it.
func (s *stack) waitReceipt(thread, event, participant, want string) agentbridge.Receipt {
	s.t.Helper()
	var got agentbridge.Receipt
	testutil.WaitFor(s.t, waitLong, "receipt "+want+" of "+event, func() bool {
		list, err := s.cl.Receipts(context.Background(), agentbridge.ReceiptsQuery{Thread: thread, Event: event})
		if err != nil {
			return false
		}
		for _, r := range list {
			if r.Participant == participant {
				got = r
				return r.State == want
			}
		}
		return false
	})
	return got
}

// TestRefusedReplyNeverVanishes: a reply larger than the bridge accepts is
// cut until it fits, says so in meta.truncated, and the run and the
// receipt say succeeded with that reply; a reply that does not fit even
// cut to a useful length is replaced by an error notice, and the run and
// the receipt say failed with the notice (contract 6.3). Before, the run
// said succeeded, the receipt succeeded with no reply, and the thread got
// nothing.
func TestRefusedReplyNeverVanishes(t *testing.T) {
	t.Parallel()
	t.Run("cut to fit", func(t *testing.T) {
		s := newStackMaxBody(t, 32<<10)
		th := s.thread("big")
		s.invite(th, "alice", agentbridge.Profile{})
		e := s.say(th, "alice", "fake:big=100000")
		reply := s.waitReplies(th, e.ID, 1)[0]
		if reply.From != "alice" {
			t.Fatalf("the trigger was answered by %s: %s", reply.From, reply.Text())
		}
		var tr struct {
			OriginalChars int    `json:"original_chars"`
			PostedChars   int    `json:"posted_chars"`
			Reason        string `json:"reason"`
		}
		if err := json.Unmarshal(reply.Meta.Extra[coordinator.MetaTruncated], &tr); err != nil {
			t.Fatalf("meta.truncated of the cut reply: %v (meta %+v)", err, reply.Meta)
		}
		text := reply.Text()
		if tr.OriginalChars < 99000 || tr.PostedChars >= tr.OriginalChars || utf8.RuneCountInString(text) > tr.PostedChars ||
			tr.Reason != agentbridge.ECodeBodyTooLarge || !strings.HasSuffix(text, "[truncated]") {
			t.Fatalf("meta.truncated = %+v for a reply of %d characters", tr, utf8.RuneCountInString(text))
		}
		inv := s.waitStatus(e.ID, "alice", ledger.StatusSucceeded)
		if inv.ReplyEventID != reply.ID || !strings.Contains(inv.Error, "too large") {
			t.Errorf("the run records reply %q, note %q; want %s and why it was cut", inv.ReplyEventID, inv.Error, reply.ID)
		}
		if r := s.waitReceipt(th, e.ID, "alice", agentbridge.ReceiptSucceeded); r.Reply != reply.ID {
			t.Errorf("receipt = %+v, want succeeded with reply %s", r, reply.ID)
		}
		if n := len(s.repliesTo(th, e.ID)); n != 1 {
			t.Errorf("%d replies to the trigger, want 1", n)
		}
	})
	t.Run("replaced by an error notice", func(t *testing.T) {
		s := newStackMaxBody(t, 1000)
		th := s.thread("too big")
		s.invite(th, "alice", agentbridge.Profile{})
		e := s.say(th, "alice", "fake:big=5000")
		notice := s.waitReplies(th, e.ID, 1)[0]
		if notice.From != s.cfg.CoordinatorID || !notice.Meta.HasTag("error") || !strings.Contains(notice.Text(), "body_too_large") {
			t.Fatalf("the trigger got %s from %s (tags %v), want the coordinator's error notice naming body_too_large", notice.Text(), notice.From, notice.Meta.Tags)
		}
		inv := s.waitStatus(e.ID, "alice", ledger.StatusFailed)
		if inv.ReplyEventID != notice.ID || !strings.Contains(inv.Error, "refused") {
			t.Errorf("the run records reply %q, error %q; want the notice %s and the refusal", inv.ReplyEventID, inv.Error, notice.ID)
		}
		if r := s.waitReceipt(th, e.ID, "alice", agentbridge.ReceiptFailed); r.Reply != notice.ID {
			t.Errorf("receipt = %+v, want failed with reply %s", r, notice.ID)
		}
	})
}
