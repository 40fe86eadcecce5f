package sqlite

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestLockedDatabaseIsAnOutage: while another process holds the file's
// write lock past the busy timeout, appends are refused with unavailable
// (503 at the bridge), store nothing, and the outage is logged once; the
// first append after the lock is released is served and logs the end.
func TestLockedDatabaseIsAnOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out SQLite's 5 s busy timeout")
	}
	logs := &testutil.Buffer{}
	s := openStore(t, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	newThread(t, s, "t1")
	release := lockWriter(t, s)
	_, err := s.Append(context.Background(), agentbridge.AppendRequest{Thread: "t1", Input: msg("user", "while locked")})
	if e := wantCode(t, err, agentbridge.ECodeUnavailable); !strings.Contains(e.Message, "nothing was stored") {
		t.Errorf("message %q", e.Message)
	}
	// Reads go on: in WAL mode a writer's lock does not stop them.
	if _, err := s.Thread(context.Background(), "t1"); err != nil {
		t.Fatalf("read while locked: %v", err)
	}
	release()
	mustAppend(t, s, "t1", msg("user", "after"))
	if evs := allEvents(t, s, "t1"); len(evs) != 2 || evs[1].Text() != "after" {
		t.Fatalf("events = %+v, want thread.created and the append after the outage", evs)
	}
	l := logs.String()
	if n := strings.Count(l, "database unreachable"); n != 1 {
		t.Errorf("%d outage lines, want 1:\n%s", n, l)
	}
	if n := strings.Count(l, "database reachable again"); n != 1 {
		t.Errorf("%d end-of-outage lines, want 1:\n%s", n, l)
	}
	if strings.Contains(l, `"level":"ERROR","msg":"group commit failed"`) {
		t.Errorf("the outage logged a commit failure per batch:\n%s", l)
	}
}

// TestRemovedFileIsAnOutage: a database file removed under the running
// store no longer acknowledges appends that SQLite would write to the
// unlinked file (gone at the next start): they are refused with
// unavailable, logged once.
func TestRemovedFileIsAnOutage(t *testing.T) {
	logs := &testutil.Buffer{}
	s := openStore(t, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	newThread(t, s, "t1")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Remove(s.Path() + suffix); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	for range 3 {
		_, err := s.Append(context.Background(), agentbridge.AppendRequest{Thread: "t1", Input: msg("user", "into the void")})
		wantCode(t, err, agentbridge.ECodeUnavailable)
	}
	if n := strings.Count(logs.String(), "database unreachable"); n != 1 {
		t.Errorf("%d outage lines for 3 refused appends, want 1:\n%s", n, logs.String())
	}
}
