// Package testbridge runs a real bridge for other packages' tests: a
// server on 127.0.0.1:0 over a SQLite file in the test's temp folder,
// closed when the test ends. It is not imported by the bridge's own tests
// (that would be an import cycle).
package testbridge

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
)

// Start runs a quiet bridge that requires token (none when "") and
// returns its base URL.
func Start(t testing.TB, token string) string {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "bridge.db"), sqlite.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := bridge.NewServer(st, bridge.Options{Addr: "127.0.0.1:0", Token: token, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Open(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Errorf("close bridge: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return srv.URL()
}
