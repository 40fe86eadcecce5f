package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/storetest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

func openBackupStore(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func appendText(ctx context.Context, s *Store, thread, text string) error {
	content, _ := json.Marshal(text)
	_, err := s.Append(ctx, agentbridge.AppendRequest{Thread: thread, Input: agentbridge.EventInput{
		Type: "message", From: "user", To: "all", Content: content,
	}})
	return err
}

// TestBackupUnderLoad takes a backup while writers append to several
// threads, then checks that the copy is sound: it passes integrity_check,
// holds between the counts seen before and after, and every thread's seq
// runs 1..n without a gap (a torn copy would show a hole or a duplicate).
func TestBackupUnderLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "bridge.db")
	s := openBackupStore(t, src)
	var threads []string
	for i := range 4 {
		th, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: fmt.Sprintf("t%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		threads = append(threads, th.ID)
	}
	loadCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var appended atomic.Int64
	errs := make(chan error, len(threads))
	for _, th := range threads {
		wg.Go(func() {
			for i := 0; loadCtx.Err() == nil && i < 100000; i++ {
				if err := appendText(loadCtx, s, th, fmt.Sprintf("message %d", i)); err != nil {
					if loadCtx.Err() == nil {
						errs <- err
					}
					return
				}
				appended.Add(1)
			}
		})
	}
	testutil.WaitFor(t, 30*time.Second, "writers to get going", func() bool { return appended.Load() > 200 })
	before, err := CountEvents(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "backup", "copy.db")
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := Backup(ctx, src, dst); err != nil {
		t.Fatalf("Backup: %v", err)
	}
	after, err := CountEvents(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("append during backup: %v", err)
	}

	if err := IntegrityCheck(ctx, dst); err != nil {
		t.Fatalf("IntegrityCheck(copy): %v", err)
	}
	n, err := CountEvents(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	if n < before || n > after {
		t.Errorf("copy holds %d events, want between %d and %d", n, before, after)
	}
	if before == after {
		t.Logf("no append landed during the backup (%d events); the bounds check is weak this run", n)
	}
	assertGapless(t, dst)
	for _, p := range []string{dst + "-wal", dst + "-shm"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the backup left %s beside the copy", p)
		}
	}
	matches, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), "*.tmp-*"))
	if len(matches) > 0 {
		t.Errorf("temporary files left behind: %v", matches)
	}
}

// assertGapless checks every thread's seqs are 1..n and agree with the
// thread heads readers see.
func assertGapless(t *testing.T, path string) {
	t.Helper()
	db, err := openRaw(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT t.id, coalesce(h.last_seq, 0), coalesce(h.last_seq, 0), count(e.gseq), coalesce(min(e.seq), 0), coalesce(max(e.seq), 0)
		FROM threads t LEFT JOIN thread_heads h ON h.id = t.id LEFT JOIN events e ON e.thread = t.id GROUP BY t.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var lastSeq, eventCount, count, lo, hi int64
		if err := rows.Scan(&id, &lastSeq, &eventCount, &count, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		if lo != 1 || hi != count || lastSeq != hi || eventCount != count {
			t.Errorf("thread %s: %d events with seq %d..%d, its head says last_seq %d count %d", id, count, lo, hi, lastSeq, eventCount)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "bridge.db")
	s := openBackupStore(t, live)
	th, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := appendText(ctx, s, th.ID, fmt.Sprintf("m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	backup := filepath.Join(dir, "backup.db")
	if err := Backup(ctx, live, backup); err != nil {
		t.Fatal(err)
	}
	// Written after the backup: the restore must roll these back.
	for i := range 3 {
		if err := appendText(ctx, s, th.ID, fmt.Sprintf("late%d", i)); err != nil {
			t.Fatal(err)
		}
	}

	err = Restore(ctx, backup, live)
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("Restore with the store open = %v, want ErrInUse", err)
	}
	if n, _ := CountEvents(ctx, live); n != 9 {
		t.Fatalf("a refused restore changed the database: %d events", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Restore(ctx, backup, live); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if n, err := CountEvents(ctx, live); err != nil || n != 6 {
		t.Errorf("restored database holds %d events (%v), want 6", n, err)
	}
	aside, _ := filepath.Glob(live + ".pre-restore-*")
	if len(aside) != 1 {
		t.Fatalf("previous database kept as %v, want one file", aside)
	}
	if n, err := CountEvents(ctx, aside[0]); err != nil || n != 9 {
		t.Errorf("the kept previous database holds %d events (%v), want 9", n, err)
	}
	// The store opens the restored file and carries on from it.
	s2 := openBackupStore(t, live)
	if err := appendText(ctx, s2, th.ID, "after restore"); err != nil {
		t.Fatalf("append after restore: %v", err)
	}
	evs, err := s2.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: th.ID, After: -1})
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Seq != 7 {
		t.Errorf("first event after restore has seq %d, want 7", last.Seq)
	}
}

func TestRestoreIntoMissingDatabase(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "a.db")
	s := openBackupStore(t, src)
	if _, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "b.db")
	if err := Backup(ctx, src, backup); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "new", "bridge.db")
	if err := Restore(ctx, backup, dst); err != nil {
		t.Fatalf("Restore into a new folder: %v", err)
	}
	if n, err := CountEvents(ctx, dst); err != nil || n != 1 {
		t.Errorf("restored %d events (%v), want 1", n, err)
	}
}

func TestRestoreRefusesBadBackups(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "bridge.db")
	s := openBackupStore(t, live)
	if _, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte("this is not a database, not even close to one....................................................................................................."), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite3", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE notes (x)"); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	for name, src := range map[string]string{
		"missing": filepath.Join(dir, "nope.db"), "garbage": garbage, "not a bridge db": other,
	} {
		if err := Restore(ctx, src, live); err == nil {
			t.Errorf("%s: Restore accepted %s", name, src)
		}
	}
	if n, err := CountEvents(ctx, live); err != nil || n != 1 {
		t.Errorf("a refused restore changed the database: %d events (%v)", n, err)
	}
	if aside, _ := filepath.Glob(live + ".pre-restore-*"); len(aside) > 0 {
		t.Errorf("a refused restore moved the database aside: %v", aside)
	}
}

func TestIntegrityCheckFindsCorruption(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "bridge.db")
	s := openBackupStore(t, src)
	th, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := appendText(ctx, s, th.ID, fmt.Sprintf("message number %d with some padding to fill pages", i)); err != nil {
			t.Fatal(err)
		}
	}
	copyPath := filepath.Join(dir, "copy.db")
	if err := Backup(ctx, src, copyPath); err != nil {
		t.Fatal(err)
	}
	if err := IntegrityCheck(ctx, copyPath); err != nil {
		t.Fatalf("fresh copy: %v", err)
	}
	b, err := os.ReadFile(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	// Scribble over the second half of the file (index and table pages),
	// keeping the header so it still opens as a database.
	for i := len(b) / 2; i < len(b); i += 7 {
		b[i] ^= 0x5a
	}
	if err := os.WriteFile(copyPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := IntegrityCheck(ctx, copyPath); err == nil {
		t.Error("IntegrityCheck passed a scribbled-over database")
	}
	if err := IntegrityCheck(ctx, filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("IntegrityCheck(missing) = %v, want ErrNotExist", err)
	}
}

// BenchmarkBackup measures a backup of a database of b.N-independent size
// (2000 events) so numbers compare across runs.
func BenchmarkBackup(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	src := filepath.Join(dir, "bridge.db")
	s, err := Open(ctx, src, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	th, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 250 {
				if err := appendText(ctx, s, th.ID, fmt.Sprintf("w%d message %d", w, i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := Backup(ctx, src, filepath.Join(dir, fmt.Sprintf("b%d.db", i))); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBackupRemovesLeftovers: a backup killed with -9 leaves its temporary
// copy and its journal beside --to; the next backup removes them (and
// nothing else), and a backup that fails leaves nothing of its own.
func TestBackupRemovesLeftovers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "a.db")
	s := openBackupStore(t, src)
	if _, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "b.db")
	left := []string{"b.db.tmp-4242", "b.db.tmp-4242-journal", "b.db.tmp-77-wal", "b.db.tmp-77-shm"}
	kept := []string{"b.db.tmp-notes", "c.db.tmp-4242"}
	for _, name := range append(append([]string{}, left...), kept...) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("leftover"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Backup(ctx, src, dst); err != nil {
		t.Fatal(err)
	}
	for _, name := range left {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still there after the next backup (%v)", name, err)
		}
	}
	for _, name := range kept {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s, not a leftover of ours, was removed: %v", name, err)
		}
	}
	notDB := filepath.Join(dir, "not-a-database")
	if err := os.WriteFile(notDB, []byte("this is not SQLite"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Backup(ctx, notDB, filepath.Join(dir, "d.db")); err == nil {
		t.Fatal("a backup of a file that is not a database worked")
	}
	matches, err := filepath.Glob(filepath.Join(dir, "d.db*"))
	if err != nil || len(matches) != 0 {
		t.Errorf("a failed backup left %v (%v)", matches, err)
	}
}

// TestBackupRestoreAttachments: a backup holds the attachments with the
// events, and a restore brings them back byte for byte, still named by
// their event and served.
func TestBackupRestoreAttachments(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src := filepath.Join(dir, "bridge.db")
	s := openBackupStore(t, src)
	if _, _, err := s.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 1, 2, 3}, 400_000) // several chunks
	a := storetest.NewAttachment(data, "shot.png", "image/png")
	if _, err := s.PutAttachment(ctx, "t", a, bytes.NewReader(data), time.Now()); err != nil {
		t.Fatal(err)
	}
	ref, _ := json.Marshal([]agentbridge.Attachment{a})
	in := agentbridge.EventInput{From: "user", Content: json.RawMessage(`"see"`), Meta: agentbridge.Meta{Extra: map[string]json.RawMessage{agentbridge.MetaAttachments: ref}}}
	if _, err := s.Append(ctx, agentbridge.AppendRequest{Thread: "t", Input: in}); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "backup.db")
	if err := Backup(ctx, src, backup); err != nil {
		t.Fatal(err)
	}
	restored := filepath.Join(dir, "restored", "bridge.db")
	if err := Restore(ctx, backup, restored); err != nil {
		t.Fatal(err)
	}
	r := openBackupStore(t, restored)
	rc, found, err := r.OpenAttachment(ctx, a.ID)
	if err != nil || !found {
		t.Fatalf("open the restored attachment: found %v, %v", found, err)
	}
	defer rc.Close()
	back, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("restored %d bytes, %v; want the %d backed up", len(back), err, len(data))
	}
	if held, err := r.AttachmentHeld(ctx, a.ID, "t"); err != nil || !held {
		t.Errorf("restored attachment held by its thread: %v, %v", held, err)
	}
	if n, err := r.SweepAttachments(ctx, time.Now().Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("a sweep after the restore removed %d, %v; the attachment is named by an event", n, err)
	}
}
