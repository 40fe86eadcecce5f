package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/spf13/cobra"
)

// backupCommand is "agent-bridge backup --to FILE [--db DB]".
func (m *Main) backupCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	to := fs.String("to", "", "the backup file to write (required)")
	db := fs.String("db", m.env(agentbridge.EnvDB, agentbridge.DefaultDBPath), "the bridge database (env BRIDGE_DB); the server may be running")
	force := fs.Bool("force", false, "replace the --to file if it exists")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("backup takes no arguments, got %q", pos[0])
		}
		if *to == "" {
			return usagef("backup: --to FILE is required")
		}
		if pg, err := isPostgres("db", *db); err != nil {
			return err
		} else if pg {
			return usagef("backup: %s", pgDumpAdvice)
		}
		if _, err := os.Stat(*db); err != nil {
			return usagef("--db: %v", err)
		}
		if _, err := os.Stat(*to); err == nil && !*force {
			return usagef("--to: %s already exists; choose another name, or pass --force to replace it", *to)
		}
		if err := sqlitex.MakeFolder(filepath.Dir(*to)); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		start := time.Now()
		if err := sqlite.Backup(ctx, *db, *to); err != nil {
			return err
		}
		n, err := sqlite.CountEvents(ctx, *to)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "backed up %d events from %s to %s (integrity ok, %s)\n", n, *db, *to, time.Since(start).Round(time.Millisecond))
		return nil
	}
}

// restoreCommand is "agent-bridge restore --from FILE [--db DB]".
func (m *Main) restoreCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	from := fs.String("from", "", "the backup file to restore (required)")
	db := fs.String("db", m.env(agentbridge.EnvDB, agentbridge.DefaultDBPath), "the bridge database to replace (env BRIDGE_DB); the server must be stopped")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("restore takes no arguments, got %q", pos[0])
		}
		if *from == "" {
			return usagef("restore: --from FILE is required")
		}
		if pg, err := isPostgres("db", *db); err != nil {
			return err
		} else if pg {
			return usagef("restore: %s", pgDumpAdvice)
		}
		if _, err := os.Stat(*from); err != nil {
			return usagef("--from: %v", err)
		}
		before, _ := filepath.Glob(*db + ".pre-restore-*")
		if err := sqlite.Restore(ctx, *from, *db); err != nil {
			return err
		}
		n, err := sqlite.CountEvents(ctx, *db)
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "restored %d events from %s into %s\n", n, *from, *db)
		after, _ := filepath.Glob(*db + ".pre-restore-*")
		for _, p := range after {
			if !slices.Contains(before, p) {
				fmt.Fprintf(m.Stdout, "the previous database is kept as %s\n", p)
			}
		}
		fmt.Fprintln(m.Stdout, "clients that remember a later cursor will get 409 cursor_ahead and must resync")
		return nil
	}
}
