package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
)

func TestBackupAndRestoreCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db, store := opsStore(t, dir, 5)
	to := filepath.Join(dir, "backups", "b1.db")

	m, stdout, _ := opsMain(nil)
	if err := m.Run(ctx, []string{"backup", "--to", to, "--db", db}); err != nil {
		t.Fatalf("backup: %v", err)
	}
	if !strings.Contains(stdout.String(), "backed up 5 events") {
		t.Errorf("backup output: %s", stdout)
	}
	if err := m.Run(ctx, []string{"backup", "--to", to, "--db", db}); exitCode(io.Discard, err) != 2 {
		t.Errorf("backup over an existing file without --force: %v, want a usage error", err)
	}
	if err := m.Run(ctx, []string{"backup", "--db", db}); exitCode(io.Discard, err) != 2 {
		t.Errorf("backup without --to: %v, want a usage error", err)
	}

	err := m.Run(ctx, []string{"restore", "--from", to, "--db", db})
	if !errors.Is(err, sqlite.ErrInUse) || exitCode(io.Discard, err) != 1 {
		t.Fatalf("restore while the server has the database open: %v, want ErrInUse", err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if err := m.Run(ctx, []string{"restore", "--from", to, "--db", db}); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if out := stdout.String(); !strings.Contains(out, "restored 5 events") || !strings.Contains(out, "previous database is kept as "+db+".pre-restore-") {
		t.Errorf("restore output: %s", out)
	}
}
