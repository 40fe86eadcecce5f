package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

func TestSessions(t *testing.T) {
	ctx := context.Background()
	path := ledgerPath(t)
	db, err := ledger.Open(ctx, path, "bridge-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	get := func(participant, client string) ledger.Session {
		t.Helper()
		s, err := db.Session(ctx, "t1", participant, client)
		must(err)
		return s
	}
	if s := get("alice", "claude"); s.ID != "" || s.Turns != 0 {
		t.Fatalf("unknown pair has session %+v", s)
	}
	must(db.RecordSession(ctx, "t1", "alice", "claude", "s1", 5, now))
	must(db.RecordSession(ctx, "t1", "alice", "claude", "s1", 7, now))
	if s := get("alice", "claude"); s.ID != "s1" || s.Turns != 2 || s.TriggerSeq != 7 {
		t.Fatalf("after two turns: %+v", s)
	}
	// Another client of the same participant, and another participant of
	// the same client, keep their own sessions.
	must(db.RecordSession(ctx, "t1", "alice", "codex", "x1", 8, now))
	must(db.RecordSession(ctx, "t1", "bob", "claude", "b1", 8, now))
	if s := get("alice", "claude"); s.ID != "s1" {
		t.Fatalf("alice/claude became %+v", s)
	}
	// A different id (the CLI refused s1) starts again at one turn.
	must(db.RecordSession(ctx, "t1", "alice", "claude", "s2", 9, now))
	if s := get("alice", "claude"); s.ID != "s2" || s.Turns != 1 {
		t.Fatalf("after a new id: %+v", s)
	}
	// Reset at seq 10 forgets alice's sessions of every client, not bob's.
	must(db.ResetSessions(ctx, "t1", "alice", 10))
	if s := get("alice", "claude"); s.ID != "" {
		t.Fatalf("reset left %+v", s)
	}
	if s := get("alice", "codex"); s.ID != "" {
		t.Fatalf("reset left %+v", s)
	}
	if s := get("bob", "claude"); s.ID != "b1" {
		t.Fatalf("reset of alice forgot bob's session: %+v", s)
	}
	// A run for a trigger before the reset that finishes after it does not
	// bring the session back; one after the reset does.
	must(db.RecordSession(ctx, "t1", "alice", "claude", "s2", 9, now))
	if s := get("alice", "claude"); s.ID != "" {
		t.Fatalf("an older run undid the reset: %+v", s)
	}
	must(db.RecordSession(ctx, "t1", "alice", "claude", "s3", 11, now))
	// Replaying the old reset (a restart before the cursor moved) keeps it.
	must(db.ResetSessions(ctx, "t1", "alice", 10))
	if s := get("alice", "claude"); s.ID != "s3" || s.Turns != 1 {
		t.Fatalf("a replayed reset forgot a newer session: %+v", s)
	}
	list, err := db.Sessions(ctx, "t1")
	must(err)
	if len(list) != 2 {
		t.Fatalf("sessions of t1 = %+v, want alice/claude and bob/claude", list)
	}
	other, err := db.Sessions(ctx, "t2")
	must(err)
	if len(other) != 0 {
		t.Fatalf("sessions of t2 = %+v", other)
	}
	// Kept across a reopen.
	must(db.Close())
	db, err = ledger.Open(ctx, path, "bridge-coordinator")
	must(err)
	defer db.Close()
	if s := get("alice", "claude"); s.ID != "s3" {
		t.Fatalf("after reopen: %+v", s)
	}
}

func TestLastReply(t *testing.T) {
	ctx := context.Background()
	db, err := ledger.Open(ctx, ledgerPath(t), "bridge-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, ok, err := db.LastReply(ctx, "t1", "alice"); err != nil || ok {
		t.Fatalf("unknown pair: ok %v, err %v", ok, err)
	}
	for _, seq := range []int64{5, 9, 7} {
		if err := db.NoteReply(ctx, "t1", "alice", seq); err != nil {
			t.Fatal(err)
		}
	}
	if seq, ok, err := db.LastReply(ctx, "t1", "alice"); err != nil || !ok || seq != 9 {
		t.Fatalf("last reply = %d, %v, %v; want 9 (an older seq never wins)", seq, ok, err)
	}
	if _, ok, _ := db.LastReply(ctx, "t1", "bob"); ok {
		t.Fatal("bob has alice's last reply")
	}
}
