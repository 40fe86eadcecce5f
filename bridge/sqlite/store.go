// Package sqlite is the bridge's durable event log: an agentbridge.EventStore
// in one SQLite file in WAL mode.
//
// All writes go through one writer goroutine that owns a single connection
// and commits concurrent appends together (group commit) in one BEGIN
// IMMEDIATE transaction. Every refusal is decided before the refused append
// writes anything, so it never fails its neighbours; every caller gets its
// answer only after the commit. Being the only writer, the goroutine caches
// each thread's head and state, reading a thread from the file once. Reads
// use a separate read-only pool, so stream catch-up never queues behind
// writes. What the PostgreSQL store does alike is in internal/storecore.
// docs/storage.md describes the schema and the reasoning.
package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

//go:embed migrations/*.sql
var migrations embed.FS

var (
	_ agentbridge.EventStore      = (*Store)(nil)
	_ agentbridge.StatsStore      = (*Store)(nil)
	_ agentbridge.ReceiptStore    = (*Store)(nil)
	_ agentbridge.SuggestionStore = (*Store)(nil)
	_ agentbridge.ClaimStore      = (*Store)(nil)
)

// DefaultMaxBatch is the default cap on appends per group commit.
const DefaultMaxBatch = storecore.DefaultMaxBatch

// groupWait bounds how long the writer holds a commit open for more
// requests (see Store.gather): long enough to collect a commit's worth of
// requests from concurrent clients, short against an append's round trip.
// The benchmark chose it: 150 µs gathered too little at 32 clients, 600 µs
// left cores idle (docs/performance.md).
const groupWait = 300 * time.Microsecond

// readPoolSize caps the read-only pool; SQLite readers in WAL mode do not
// block each other, so this only bounds memory and file handles.
const readPoolSize = 8

// checkpointEvery is how many commits pass between background WAL
// checkpoints: a few hundred pages each, so that when the writer's own
// checkpoint comes due it finds nearly everything copied already (see
// checkpointer).
const checkpointEvery = 32

// writerCheckpointPages is the writer connection's wal_autocheckpoint. Its
// checkpoint is the one that lets the WAL restart from the beginning, and it
// fsyncs twice while every append waits, so it runs 4× less often than
// SQLite's default of 1,000 pages; the WAL stays under ~16 MB.
const writerCheckpointPages = 4000

// ErrClosed is returned by writes attempted after Close.
var ErrClosed = storecore.ErrClosed

// Options configures Open (storecore.Options). The zero value is usable.
type Options = storecore.Options

// Store is the SQLite event store. It is safe for concurrent use; Close it
// to stop the writer and release the file.
type Store struct {
	// Engine is the store both drivers share: every read and write but
	// the appends' (internal/storecore).
	storecore.Engine
	path string
	max  int

	wdb *sql.DB // one connection, held by the writer as conn
	rdb *sql.DB // read-only pool
	cdb *sql.DB // one connection, used only by the checkpointer goroutine

	// w is the writer goroutine's own state; nothing else touches it
	// (Open builds it, Close closes its connection after the writer
	// exits).
	w writerState

	// gatherNeed is how many queued requests the gathering writer waits
	// for (0 when it is not waiting); the submitter whose request makes
	// the queue that long signals gatherFull (buffered 1).
	gatherNeed atomic.Int64
	gatherFull chan struct{}
	// checkpoint wakes the checkpointer (buffered 1, so wake-ups
	// coalesce).
	checkpoint  chan struct{}
	ckptStopped chan struct{} // closed when the checkpointer has exited

	reqs      chan *request
	reqPool   sync.Pool     // of *request, each with its reply channel
	done      chan struct{} // closed by Close: drain and stop
	stopped   chan struct{} // closed when the writer goroutine has exited
	closeOnce sync.Once
	cerr      error

	// notifier wakes readers after a commit (see Notify).
	notifier *storecore.Notifier

	// file is the database file as opened, which checkFile compares the
	// path with.
	file os.FileInfo
	// epoch is the log's epoch, read at Open: only a restore, which
	// needs the server stopped, changes it.
	epoch agentbridge.LogEpoch
	// uploads are the attachments whose chunks are being written
	// (attachments.go).
	uploads uploadSet
	// legacyKeys says the database holds idempotency keys of a release
	// before scoped keys (idempotency_legacy, filled by its migration
	// only): without any, an append's retry looks up nothing more.
	legacyKeys bool
}

// LogEpoch returns the log's epoch (see agentbridge.LogEpoch).
func (s *Store) LogEpoch() agentbridge.LogEpoch { return s.epoch }

// Open opens (creating the folder and the file if needed) and migrates the
// store at path, and starts its writer. A database written by a newer
// agent-bridge is refused with an error wrapping migration.ErrSchemaTooNew.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	opts = opts.WithDefaults()
	// A database an older release made is readable by other users until
	// this open makes it 0600 (sqlitex.MakePrivate); say so once, then.
	var widened os.FileMode
	if st, err := os.Stat(path); err == nil {
		widened = st.Mode().Perm() & 0o077
	}
	wdb, err := sqlitex.Open(path, sqlitex.Options{MaxOpen: 1})
	if err != nil {
		return nil, err
	}
	if err := checkFTS5(ctx, wdb); err != nil {
		_ = wdb.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := sqlitex.Migrate(ctx, wdb, migrations, "migrations"); err != nil {
		_ = wdb.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	conn, err := wdb.Conn(ctx)
	if err != nil {
		_ = wdb.Close()
		return nil, fmt.Errorf("open writer connection to %s: %w", path, err)
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", writerCheckpointPages)); err != nil {
		_ = conn.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("open %s: set wal_autocheckpoint: %w", path, err)
	}
	if err := (&Store{Engine: storecore.Engine{Log: opts.Logger}}).backfill(ctx, conn); err != nil {
		_ = conn.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	st, err := prepareWriter(ctx, conn)
	if err != nil {
		_ = conn.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var epoch agentbridge.LogEpoch
	var legacyKeys bool
	if err := conn.QueryRowContext(ctx, `SELECT id, base, EXISTS (SELECT 1 FROM idempotency_legacy) FROM log_epoch`).Scan(&epoch.ID, &epoch.Base, &legacyKeys); err != nil {
		_ = st.close()
		_ = conn.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("open %s: read the log's epoch: %w", path, err)
	}
	file, err := os.Stat(path)
	if err != nil {
		_ = st.close()
		_ = conn.Close()
		_ = wdb.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	cdb, err := sqlitex.Open(path, sqlitex.Options{MaxOpen: 1})
	if err != nil {
		_ = st.close()
		_ = conn.Close()
		_ = wdb.Close()
		return nil, err
	}
	rdb, err := sqlitex.Open(path, sqlitex.Options{ReadOnly: true, MaxOpen: readPoolSize})
	if err != nil {
		_ = st.close()
		_ = conn.Close()
		_ = wdb.Close()
		_ = cdb.Close()
		return nil, err
	}
	s := &Store{
		path:       path,
		epoch:      epoch,
		legacyKeys: legacyKeys,
		max:        opts.MaxBatch,
		wdb:        wdb,
		rdb:        rdb,
		cdb:        cdb,
		w: writerState{
			conn: conn, st: st, heads: make(map[string]head),
			scratch: batch{index: make(map[string]int)}, gatherWait: groupWait,
			entropy: ulid.Monotonic(rand.Reader, 0),
		},
		checkpoint:  make(chan struct{}, 1),
		ckptStopped: make(chan struct{}),
		reqs:        make(chan *request, opts.MaxBatch),
		reqPool:     sync.Pool{New: func() any { return &request{reply: make(chan response, 1)} }},
		gatherFull:  make(chan struct{}, 1),
		done:        make(chan struct{}),
		stopped:     make(chan struct{}),
		notifier:    storecore.NewNotifier(),
		file:        file,
	}
	s.Engine = storecore.Engine{Dialect: storecore.SQLite, Read: storecore.SQLConn(rdb), Write: s.writeTx, ClaimWrite: s.claimWrite,
		ReadTx: s.readTx, Reads: reads,
		Outage: storecore.NewOutage(opts.Logger, unreachable, nil), Humans: opts.Humans, Log: opts.Logger,
		Recent: storecore.NewTail(opts.TailEvents, storecore.DefaultTailBytes)}
	go s.run()
	go s.checkpointer()
	s.Log.Debug("store opened", "path", path)
	if widened != 0 {
		// The files are the owner's alone now; the folder, which may be a
		// person's own, is theirs to tighten.
		folder, open := sqlitex.FolderOpen(path)
		s.Log.Warn("the database was readable by other users; it and its -wal and -shm are 0600 now", "path", path,
			"folder_mode", fmt.Sprintf("%#o", folder), "folder_open_to_others", open)
	}
	return s, nil
}

// Path returns the database file's path, as given to Open.
func (s *Store) Path() string { return s.path }

// Close stops accepting writes, lets the writer commit what is already
// queued, then closes both pools. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		<-s.stopped
		<-s.ckptStopped
		s.cerr = errors.Join(s.w.st.close(), s.w.conn.Close(), s.wdb.Close(), s.cdb.Close(), s.rdb.Close())
		if s.cerr != nil {
			s.cerr = fmt.Errorf("close store: %w", s.cerr)
		}
	})
	return s.cerr
}

// Notify returns a channel closed after the next commit. Grab it before
// querying: a commit that lands between the query and the wait then still
// wakes the reader.
func (s *Store) Notify() <-chan struct{} {
	return s.notifier.Notify()
}

// checkpointer copies the WAL back into the database file whenever the
// writer asks (every checkpointEvery commits), on its own connection: a
// checkpoint writes and fsyncs the file, and done by the writer at COMMIT
// (SQLite's default) it held up every append queued behind it. A PASSIVE
// checkpoint takes no write lock, so the writer keeps committing meanwhile.
func (s *Store) checkpointer() {
	defer close(s.ckptStopped)
	ctx := context.Background()
	for {
		select {
		case <-s.checkpoint:
			var busy, walPages, copied int
			if err := s.cdb.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &walPages, &copied); err != nil {
				s.Log.Warn("background checkpoint failed", "err", err)
			}
		case <-s.stopped:
			return
		}
	}
}
