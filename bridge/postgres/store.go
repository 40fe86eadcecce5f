// Package postgres is the bridge's event log on PostgreSQL: an
// agentbridge.EventStore that several bridge processes may share.
//
// Like the SQLite store, one writer goroutine per process commits
// concurrent appends together (group commit). Across processes, each
// commit locks the rows of the threads it appends to (in id order, so two
// bridges cannot deadlock), decides seq and ts under those locks, and takes
// the one log_head row's lock last, keeping it until COMMIT: gseq numbers
// are handed out in commit order, so a reader following after=<gseq> never
// skips an event that commits late with a smaller number. Commits NOTIFY a
// channel that every store LISTENs on, which wakes the SSE streams of the
// other bridges. docs/storage.md ("PostgreSQL") explains the reasoning.
package postgres

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/backoff"
	"github.com/agent-bridge/agent-bridge/internal/pgschema"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// SchemaTable is the table recording the bridge schema's version.
const SchemaTable = "bridge_schema"

// notifyChannel is the LISTEN/NOTIFY channel commits wake readers on.
const notifyChannel = "agent_bridge_events"

// receiptChannel carries each changed receipt (receiptNotice) to the other
// bridges on the database, whose streams announce it too.
const receiptChannel = "agent_bridge_receipts"

// DefaultMaxBatch is the default cap on appends per group commit.
const DefaultMaxBatch = storecore.DefaultMaxBatch

// poolSize caps the connections of one store: the writer's, the readers'
// (stream catch-up, queries) and none for the listener, which has its own.
const poolSize = 16

var (
	_ agentbridge.EventStore      = (*Store)(nil)
	_ agentbridge.ReceiptStore    = (*Store)(nil)
	_ agentbridge.ReceiptWatcher  = (*Store)(nil)
	_ agentbridge.SuggestionStore = (*Store)(nil)
	_ agentbridge.ClaimStore      = (*Store)(nil)
)

// ErrClosed is returned by writes attempted after Close.
var ErrClosed = storecore.ErrClosed

// Options configures Open (storecore.Options). The zero value is usable.
type Options = storecore.Options

// Store is the PostgreSQL event store. It is safe for concurrent use;
// Close it to stop the writer and the listener.
type Store struct {
	// Engine is the store both drivers share: every read and write but
	// the appends' (internal/storecore).
	storecore.Engine
	url  string
	max  int
	pool *pgxpool.Pool

	reqs       chan *request
	done       chan struct{} // closed by Close: drain and stop
	stopped    chan struct{} // closed when the writer has exited
	listenCtx  context.Context
	stopListen context.CancelFunc
	listened   chan struct{} // closed when the listener has exited
	listening  chan struct{} // closed once the first LISTEN is in place
	closeOnce  sync.Once

	entropy *ulid.MonotonicEntropy // the writer goroutine's only

	// origin tells this store's receipt notices from other processes'
	// (see receiptNotice); watchers are WatchReceipts' functions.
	origin   string
	watchMu  sync.Mutex
	watchers []func(agentbridge.Receipt)

	// notifier wakes readers after a commit (see Notify).
	notifier *storecore.Notifier

	// epoch is the log's epoch, read or begun at Open (openEpoch).
	epoch agentbridge.LogEpoch
	// legacyKeys says the database holds idempotency keys of a release
	// before scoped keys (idempotency_legacy, filled by its migration
	// only): without any, an append's retry looks up nothing more.
	legacyKeys bool
}

// IsURL reports whether db names a PostgreSQL database rather than a
// SQLite file.
func IsURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// Open connects to the database at url (postgres://…), migrates it and
// starts the writer and the listener. A database migrated by a newer
// agent-bridge is refused with an error wrapping migration.ErrSchemaTooNew.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	opts = opts.WithDefaults()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse PostgreSQL URL: %w", err)
	}
	cfg.MaxConns = poolSize
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	if err := backfill(ctx, pool, opts); err != nil {
		pool.Close()
		return nil, err
	}
	epoch, err := openEpoch(ctx, pool, opts.Logger)
	if err != nil {
		pool.Close()
		return nil, err
	}
	var legacyKeys bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM idempotency_legacy)`).Scan(&legacyKeys); err != nil {
		pool.Close()
		return nil, fmt.Errorf("look for the idempotency keys of an older release: %w", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	s := &Store{
		url: url, max: opts.MaxBatch, pool: pool, epoch: epoch, legacyKeys: legacyKeys,
		reqs:       make(chan *request, opts.MaxBatch),
		done:       make(chan struct{}),
		stopped:    make(chan struct{}),
		listenCtx:  lctx,
		stopListen: stop,
		listened:   make(chan struct{}),
		listening:  make(chan struct{}),
		entropy:    ulid.Monotonic(rand.Reader, 0),
		origin:     ulid.Make().String(),
		notifier:   storecore.NewNotifier(),
	}
	// A restarted server does not know the pooled connections: drop them
	// when an outage starts, so the first requests after its return do not
	// fail on them.
	s.Engine = storecore.Engine{Dialect: storecore.PostgreSQL, Read: pgConn{pool}, Write: s.writeTx, ClaimWrite: s.claimWrite,
		ReadTx: s.readTx, Reads: reads,
		Outage: storecore.NewOutage(opts.Logger, unreachable, pool.Reset), Humans: opts.Humans, Log: opts.Logger}
	go s.run()
	go s.listen()
	// Streams rely on cross-process wake-ups from the first moment.
	select {
	case <-s.listening:
	case <-ctx.Done():
		_ = s.Close()
		return nil, fmt.Errorf("listen for commits: %w", ctx.Err())
	case <-time.After(30 * time.Second):
		_ = s.Close()
		return nil, errors.New("listen for commits: PostgreSQL did not answer LISTEN within 30 s")
	}
	return s, nil
}

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer func() { _ = db.Close() }()
	if err := pgschema.Migrate(ctx, db, migrations, "migrations", SchemaTable); err != nil {
		return fmt.Errorf("migrate bridge schema: %w", err)
	}
	return nil
}

// SchemaVersions returns the bridge schema version of the database db and
// the one this binary brings it to, for doctor.
func SchemaVersions(ctx context.Context, db *sql.DB) (have, want int, err error) {
	if want, err = pgschema.Latest(migrations, "migrations"); err != nil {
		return 0, 0, err
	}
	have, err = pgschema.Version(ctx, db, SchemaTable)
	return have, want, err
}

// Close stops accepting writes, lets the writer commit what is queued,
// stops the listener and closes the pool. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		<-s.stopped
		s.stopListen()
		<-s.listened
		s.pool.Close()
	})
	return nil
}

// Notify returns a channel closed after the next commit of any bridge
// sharing the database. Grab it before querying.
func (s *Store) Notify() <-chan struct{} {
	return s.notifier.Notify()
}

// listen holds a connection LISTENing on notifyChannel and wakes readers
// on every notification, whoever committed. When the connection drops it
// reconnects and wakes readers once, since a commit may have slipped by.
//
// It logs the loss once and the reconnection once, however many attempts
// an outage takes (the store's outage log says the rest), and retries at
// least every listenRetryMax, so other bridges' commits wake this one's
// streams again within about a second of the database's return.
func (s *Store) listen() {
	defer close(s.listened)
	first := true
	lost := false
	b := backoff.Backoff{Min: listenRetryMin, Max: listenRetryMax}
	for s.listenCtx.Err() == nil {
		err := s.listenOnce(&first, &lost, &b)
		if s.listenCtx.Err() != nil {
			return
		}
		if !lost {
			lost = true
			s.Log.Warn("commit listener lost its connection; reconnecting", "err", err)
		} else {
			s.Log.Debug("commit listener: reconnect failed", "err", err)
		}
		s.notifier.Wake()
		if !backoff.Sleep(s.listenCtx, b.Next()) {
			return
		}
	}
}

// The listener's reconnect backoff: its first step, and the cap that keeps
// a database's return noticed within about a second.
const (
	listenRetryMin = 50 * time.Millisecond
	listenRetryMax = time.Second
)

// listenOnce holds one LISTEN connection until it fails, and resets b once
// the connection listens.
func (s *Store) listenOnce(first, lost *bool, b *backoff.Backoff) error {
	ctx := s.listenCtx
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel+"; LISTEN "+receiptChannel); err != nil {
		return err
	}
	if *first {
		*first = false
		close(s.listening)
	} else {
		s.notifier.Wake()
	}
	if *lost {
		*lost = false
		s.Log.Info("commit listener reconnected")
	}
	b.Reset()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == receiptChannel {
			s.receiptNoticed(n.Payload)
			continue
		}
		s.notifier.Wake()
	}
}
