// Package testbridge runs a real bridge for other packages' tests: a
// server on 127.0.0.1 over a SQLite file in the test's temp folder, stopped
// when the test ends. It is not imported by the bridge's own tests (that
// would be an import cycle).
package testbridge

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/bridge/notify"
	"github.com/agent-bridge/agent-bridge/bridge/sqlite"
)

// Bridge is a running test bridge, which a test can stop and start again
// on the same file and address (a bridge restart as its clients see it).
type Bridge struct {
	t     testing.TB
	db    string
	addr  string
	token string
	srv   *bridge.Server
	store *sqlite.Store
	// maxBody is the server's MaxBody (0 = its default).
	maxBody int64
}

// New runs a quiet bridge that requires token (none when "") on a free
// port, until the test ends.
func New(t testing.TB, token string) *Bridge {
	t.Helper()
	b := &Bridge{t: t, db: filepath.Join(t.TempDir(), "bridge.db"), addr: "127.0.0.1:0", token: token}
	b.Start()
	t.Cleanup(b.Stop)
	return b
}

// NewMaxBody is New with the server's request body limit set to maxBody
// bytes, for tests of what happens to a request the bridge refuses as too
// large.
func NewMaxBody(t testing.TB, token string, maxBody int64) *Bridge {
	t.Helper()
	b := &Bridge{t: t, db: filepath.Join(t.TempDir(), "bridge.db"), addr: "127.0.0.1:0", token: token, maxBody: maxBody}
	b.Start()
	t.Cleanup(b.Stop)
	return b
}

// Start runs a quiet bridge that requires token (none when "") and
// returns its base URL.
func Start(t testing.TB, token string) string {
	t.Helper()
	return New(t, token).URL()
}

// Start starts the bridge again after Stop, on the same file and address.
func (b *Bridge) Start() {
	b.t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := sqlite.Open(context.Background(), b.db, sqlite.Options{Logger: quiet})
	if err != nil {
		b.t.Fatal(err)
	}
	// Private endpoints are allowed: the tests' push service
	// (internal/testkit/fakepush) is on loopback.
	srv, err := bridge.NewServer(st, bridge.Options{Addr: b.addr, Token: b.token, Logger: quiet, MaxBody: b.maxBody,
		Notify: notify.Options{AllowPrivateEndpoints: true}})
	if err != nil {
		b.t.Fatal(err)
	}
	if err := srv.Open(); err != nil {
		b.t.Fatal(err)
	}
	u, err := url.Parse(srv.URL())
	if err != nil {
		b.t.Fatal(err)
	}
	b.srv, b.store, b.addr = srv, st, u.Host
}

// Stop stops the server and closes its store; a stopped bridge's Stop
// does nothing.
func (b *Bridge) Stop() {
	if b.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Close(ctx); err != nil {
		b.t.Errorf("close bridge: %v", err)
	}
	if err := b.store.Close(); err != nil {
		b.t.Errorf("close store: %v", err)
	}
	b.srv, b.store = nil, nil
}

// URL is the bridge's base URL; it stays the same across Stop and Start.
func (b *Bridge) URL() string { return "http://" + b.addr }

// Token is the token the bridge requires ("" for none).
func (b *Bridge) Token() string { return b.token }

// Backup writes a backup of the bridge's database to path while it runs, as
// agent-bridge backup does.
func (b *Bridge) Backup(path string) {
	b.t.Helper()
	if err := sqlite.Backup(context.Background(), b.db, path); err != nil {
		b.t.Fatal(err)
	}
}

// Restore replaces the database of the stopped bridge with the backup at
// path, as agent-bridge restore does; Start serves it.
func (b *Bridge) Restore(path string) {
	b.t.Helper()
	if err := sqlite.Restore(context.Background(), path, b.db); err != nil {
		b.t.Fatal(err)
	}
}
