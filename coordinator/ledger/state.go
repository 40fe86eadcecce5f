// Package ledger is the coordinator's ledger: a SQLite file or a
// PostgreSQL database holding the stream cursors, every routing decision,
// every invocation record and the notices still to post. It is what makes
// delivery exactly-once across crashes: a decision, the invocations it
// queues and the cursor advance past its event are committed in one
// transaction (see docs/delivery.md).
package ledger

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/pgschema"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// migrations holds the SQLite steps in migrations/ and the same steps for
// PostgreSQL in migrations/postgres/: every new step needs both.
//
//go:embed migrations/*.sql migrations/postgres/*.sql
var migrations embed.FS

// schemaTable records the ledger's schema version on PostgreSQL.
const schemaTable = "coordinator_schema"

// Invocation statuses. Queued, running and interrupted records are
// unfinished: a restarted coordinator re-runs them unless the thread already
// holds their reply.
const (
	StatusQueued      = "queued"
	StatusRunning     = "running"
	StatusSucceeded   = "succeeded"
	StatusFailed      = "failed"
	StatusTimeout     = "timeout"
	StatusInterrupted = "interrupted"
	StatusRefused     = "refused"
	// StatusPassed is a run whose adapter answered [PASS] (contract 5.2):
	// it finished and nothing was posted for it.
	StatusPassed = "passed"
	// StatusCancelled is final: a person stopped the run (contract 5.4);
	// nothing of it is posted and it is never re-run.
	StatusCancelled = "cancelled"
	// StatusElsewhere is final: another coordinator holds the run's claim
	// at the bridge (contract 7.1), or took it over and fenced this one's
	// writes. Nothing of it is posted, no receipt is written for it, and
	// its error names the holder and its host.
	StatusElsewhere = "elsewhere"
	// StatusWaiting ends a run whose agent hit a usage limit, with no
	// fallback: its claim waits at the bridge until the limit resets
	// (contract 8.5), and the record is queued again when a coordinator
	// takes it then.
	StatusWaiting = "waiting"
)

// ValidStatus reports whether s is an invocation status, so that a filter
// with a typo is refused rather than silently matching nothing.
func ValidStatus(s string) bool {
	switch s {
	case StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusTimeout, StatusInterrupted, StatusRefused,
		StatusCancelled, StatusPassed, StatusElsewhere, StatusWaiting:
		return true
	}
	return false
}

// ErrNotFound is returned when a decision or invocation does not exist.
var ErrNotFound = errors.New("not found")

// DB is the ledger as one coordinator sees it: its own rows of the
// tables keyed by coordinator id. It is safe for concurrent use.
type DB struct {
	db *conn
}

// Open opens (creating if needed) the ledger at path and migrates it: a
// SQLite file, or a PostgreSQL database when path is a postgres:// URL.
// owner is the coordinator id (the config's coordinator_id) the DB works
// as: several coordinators may share one PostgreSQL ledger, each keeping
// its own cursors, decisions, notices, party rounds and sessions, and
// owning the invocations it queued. Rows written before owners existed
// (an empty owner) are adopted by the first coordinator that opens the ledger.
func Open(ctx context.Context, path, owner string) (*DB, error) {
	if owner == "" {
		return nil, errors.New("open state db: no coordinator id to own its rows")
	}
	var d *DB
	if IsPostgresURL(path) {
		db, err := openPostgres(ctx, path)
		if err != nil {
			return nil, err
		}
		d = &DB{db: &conn{DB: db, pg: true, owner: owner}}
	} else {
		db, err := sqlitex.Open(path, sqlitex.Options{MaxOpen: 1})
		if err != nil {
			return nil, fmt.Errorf("open state db: %w", err)
		}
		if err := sqlitex.Migrate(ctx, db, migrations, "migrations"); err != nil {
			db.Close()
			return nil, fmt.Errorf("migrate state db: %w", err)
		}
		d = &DB{db: &conn{DB: db, owner: owner}}
	}
	if err := d.adopt(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

func openPostgres(ctx context.Context, url string) (*sql.DB, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, fmt.Errorf("open state db: %w", err)
	}
	db.SetMaxOpenConns(8)
	if err := pgschema.Migrate(ctx, db, migrations, "migrations/postgres", schemaTable); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate state db: %w", err)
	}
	return db, nil
}

// ownedTables are the tables whose rows belong to one coordinator.
var ownedTables = []string{"cursors", "thread_cursors", "decisions", "notices", "party_rounds", "sessions", "invocations"}

// adopt gives the rows no coordinator owns (those of a ledger written
// before owners existed) to this DB's owner, in one transaction: on a
// shared ledger the first coordinator to start after the upgrade takes
// them, as the single lease holder it replaces worked them.
func (d *DB) adopt(ctx context.Context) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("adopt the ledger's rows: %w", err)
	}
	defer tx.Rollback()
	for _, t := range ownedTables {
		if _, err := tx.ExecContext(ctx, `UPDATE `+t+` SET owner = ? WHERE owner = ''`, d.db.owner); err != nil {
			return fmt.Errorf("adopt the ledger's rows of %s: %w", t, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("adopt the ledger's rows: commit: %w", err)
	}
	return nil
}

// Owner returns the coordinator id the DB works as.
func (d *DB) Owner() string { return d.db.owner }

// Shared reports whether other coordinators may queue in this ledger too
// (PostgreSQL): a pair one of them queued first is then not queued here.
func (d *DB) Shared() bool { return d.db.pg }

// SchemaVersions returns the ledger schema version of the PostgreSQL
// database db and the one this binary brings it to, for doctor.
func SchemaVersions(ctx context.Context, db *sql.DB) (have, want int, err error) {
	if want, err = pgschema.Latest(migrations, "migrations/postgres"); err != nil {
		return 0, 0, err
	}
	have, err = pgschema.Version(ctx, db, schemaTable)
	return have, want, err
}

// Close closes the database.
func (d *DB) Close() error { return d.db.Close() }

// Invocation is one (trigger, participant) pair and what became of it. The
// pair is unique: it is queued once, and every re-run after a crash updates
// the same record.
type Invocation struct {
	// ID is the record's number, in queueing order.
	ID int64 `json:"id"`
	// Thread, TriggerID, TriggerSeq and TriggerGSeq name the trigger.
	Thread      string `json:"thread"`
	TriggerID   string `json:"trigger_id"`
	TriggerSeq  int64  `json:"trigger_seq"`
	TriggerGSeq int64  `json:"trigger_gseq"`
	// Participant is who answers; Agent the config entry that speaks for
	// it, and Command that entry's argv when the pair was queued.
	Participant string   `json:"participant"`
	Agent       string   `json:"agent"`
	Command     []string `json:"command"`
	// Hop is the trigger's hop as the bridge assigned it (contract 5.1);
	// the bridge gives the reply Hop+1.
	Hop int `json:"hop"`
	// Status is one of the Status constants.
	Status string `json:"status"`
	// ExitCode is nil until the process has exited.
	ExitCode *int `json:"exit_code"`
	// Error says why the invocation failed or was refused.
	Error string `json:"error,omitempty"`
	// QueuedAt, StartedAt and FinishedAt are agentbridge.TimeLayout
	// timestamps ("" when not reached); DurationMS is the adapter's run.
	QueuedAt   string `json:"queued_at"`
	StartedAt  string `json:"started_at,omitempty"`
	FinishedAt string `json:"finished_at,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// ReplyEventID is the reply's (or error message's) event id once
	// posted.
	ReplyEventID string `json:"reply_event_id,omitempty"`
	// PendingPost is the stored row of the events still to post when the
	// adapter finished but the post is not yet acknowledged; PendingPosts
	// decodes it.
	PendingPost json.RawMessage `json:"-"`
	// OutputBytes is how much the adapter wrote to stdout (all of it, not
	// only what was kept); StderrTail is the end of its stderr.
	OutputBytes int64  `json:"output_bytes"`
	StderrTail  string `json:"stderr_tail,omitempty"`
	// PID, PGID and ProcessStartedAt identify the adapter process, so a
	// restarted coordinator can kill a leftover group and never a
	// recycled pid.
	PID              int    `json:"pid,omitempty"`
	PGID             int    `json:"pgid,omitempty"`
	ProcessStartedAt string `json:"process_started_at,omitempty"`
	// InputTokens, OutputTokens and CostUSD are the run's usage as its
	// adapter last reported it on the progress fd (cumulative).
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	// ProgressCount counts the progress records received (all of them,
	// not only the 500 kept); ProgressBad the lines that were not records.
	ProgressCount int64 `json:"progress_count"`
	ProgressBad   int64 `json:"progress_bad"`
	// Round is the party round (1 or 2) the invocation belongs to; 0
	// outside party mode. The pair is unique per round.
	Round int `json:"round,omitempty"`
	// Owner is the coordinator id that queued the pair and runs it: on a
	// ledger several coordinators share, the first to queue a pair owns it.
	Owner string `json:"owner,omitempty"`
	// ClaimID and ClaimFence are the bridge's claim of the run while this
	// coordinator holds it (0 before it is claimed, and against a bridge
	// without claims): every write of the run carries them.
	ClaimID    int64 `json:"claim_id,omitempty"`
	ClaimFence int64 `json:"claim_fence,omitempty"`
	// Profile is the participant's invited profile its decision matched
	// (nil for a record that does not keep one: queued by an older
	// version, or by a take-over); the run uses it rather than reading the invite
	// again.
	Profile *agentbridge.Profile `json:"-"`
	// Failure is why the run failed (contract 8.5), nil for one that did
	// not; HandedTo the fallback its trigger went to instead; FallbackFrom,
	// on a fallback's run, the participant whose failure handed it over.
	Failure      *agentbridge.Failure `json:"failure,omitempty"`
	HandedTo     string               `json:"handed_to,omitempty"`
	FallbackFrom string               `json:"fallback_from,omitempty"`
}

// DecisionRecord is the recorded routing decision for one event, as JSON so that
// the ledger does not depend on the rules' types.
type DecisionRecord struct {
	EventID   string          `json:"event_id"`
	Thread    string          `json:"thread"`
	Seq       int64           `json:"seq"`
	GSeq      int64           `json:"gseq"`
	Decision  json.RawMessage `json:"decision"`
	CreatedAt string          `json:"created_at"`
}

// Notice is a coordinator message owed for a trigger (a clarification or a
// loop-guard notice), kept until the bridge acknowledges it.
type Notice struct {
	TriggerID string `json:"trigger_id"`
	Kind      string `json:"kind"`
	Thread    string `json:"thread"`
	// Post is the event to append; the ledger stores it as JSON.
	Post agentbridge.EventInput `json:"post"`
}

// Step is everything that processing one event changes in the ledger.
type Step struct {
	// GSeq and Seq are the event's positions: the global cursor and the
	// thread's cursor advance to them.
	GSeq   int64
	Thread string
	Seq    int64
	// Decision, Invocations and Notices are optional.
	Decision    *DecisionRecord
	Invocations []Invocation
	Notices     []Notice
	// PartyRound starts a party round for the event (its invocations are
	// in Invocations, with Round 1).
	PartyRound *PartyRound
}

// The names of the rows of the cursors table: the global cursor, and the id
// of the bridge log's epoch it was kept in.
const (
	cursorGlobal = "global"
	cursorEpoch  = "bridge_epoch"
)

// Commit applies a Step in one transaction, so that after a crash either the
// event was fully processed (decision recorded, invocations queued, cursor
// past it) or not at all. It returns the invocations it queued, with their
// ids; a pair already in the ledger (the event was processed before) is
// left as it is and not returned.
func (d *DB) Commit(ctx context.Context, s Step) ([]Invocation, error) {
	queued, err := d.CommitSteps(ctx, []Step{s})
	if err != nil {
		return nil, err
	}
	return queued[0], nil
}

// CommitSteps is Commit of several steps, in gseq order, in one
// transaction: the follow loop commits the events that arrived together at
// once. queued[i] are the invocations steps[i] queued.
func (d *DB) CommitSteps(ctx context.Context, steps []Step) (queued [][]Invocation, err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	now := agentbridge.FormatTime(time.Now())
	var gseq int64
	queued = make([][]Invocation, len(steps))
	for i, s := range steps {
		if queued[i], err = commitStep(ctx, tx, s, now); err != nil {
			return nil, err
		}
		gseq = max(gseq, s.GSeq)
	}
	if gseq > 0 {
		// Forward only: a step replayed behind the cursor (the follow
		// loop hands again what a broken connection left) must not move
		// it back; SetCursor is what moves it back, on purpose.
		_, err := tx.ExecContext(ctx, `INSERT INTO cursors (owner, name, value) VALUES (?, ?, ?)
			ON CONFLICT (owner, name) DO UPDATE SET value = CASE WHEN excluded.value > cursors.value THEN excluded.value ELSE cursors.value END`, tx.owner, cursorGlobal, gseq)
		if err != nil {
			return nil, fmt.Errorf("advance cursor: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return queued, nil
}

// commitStep writes one step but the global cursor.
func commitStep(ctx context.Context, tx *txn, s Step, now string) ([]Invocation, error) {
	if s.Decision != nil {
		_, err := tx.ExecContext(ctx, `INSERT INTO decisions (owner, event_id, thread, seq, gseq, decision, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (owner, event_id) DO NOTHING`,
			tx.owner, s.Decision.EventID, s.Decision.Thread, s.Decision.Seq, s.Decision.GSeq, string(s.Decision.Decision), now)
		if err != nil {
			return nil, fmt.Errorf("record decision: %w", err)
		}
	}
	queued, err := insertInvocations(ctx, tx, s.Invocations, now)
	if err != nil {
		return nil, err
	}
	if err := insertNotices(ctx, tx, s.Notices); err != nil {
		return nil, err
	}
	if s.PartyRound != nil {
		if err := insertPartyRound(ctx, tx, *s.PartyRound, now); err != nil {
			return nil, err
		}
	}
	if s.Thread != "" {
		_, err := tx.ExecContext(ctx, `INSERT INTO thread_cursors (owner, thread, seq) VALUES (?, ?, ?)
			ON CONFLICT (owner, thread) DO UPDATE SET seq = CASE WHEN excluded.seq > thread_cursors.seq THEN excluded.seq ELSE thread_cursors.seq END`, tx.owner, s.Thread, s.Seq)
		if err != nil {
			return nil, fmt.Errorf("advance thread cursor: %w", err)
		}
	}
	return queued, nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func setCursor(ctx context.Context, db execer, owner string, gseq int64) error {
	if err := putCursor(ctx, db, owner, cursorGlobal, gseq); err != nil {
		return fmt.Errorf("advance cursor: %w", err)
	}
	return nil
}

// putCursor stores owner's cursor name as value.
func putCursor(ctx context.Context, db execer, owner, name string, value int64) error {
	_, err := db.ExecContext(ctx, `INSERT INTO cursors (owner, name, value) VALUES (?, ?, ?)
		ON CONFLICT (owner, name) DO UPDATE SET value = excluded.value`, owner, name, value)
	return err
}

// readCursor reads this ledger's cursor name, and whether one was stored.
func (d *DB) readCursor(ctx context.Context, name string) (int64, bool, error) {
	var v int64
	err := d.db.QueryRowContext(ctx, `SELECT value FROM cursors WHERE owner = ? AND name = ?`, d.db.owner, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

// Cursor returns the global cursor (the gseq of the last processed event)
// and whether one was ever stored: a fresh ledger has none.
func (d *DB) Cursor(ctx context.Context) (int64, bool, error) {
	v, found, err := d.readCursor(ctx, cursorGlobal)
	if err != nil {
		return 0, false, fmt.Errorf("read cursor: %w", err)
	}
	return v, found, nil
}

// SetCursor moves the global cursor, for startup_mode "end" and for a
// bridge restored from an older backup.
func (d *DB) SetCursor(ctx context.Context, gseq int64) error {
	return setCursor(ctx, d.db, d.db.owner, gseq)
}

// BridgeEpoch returns the id of the bridge log's epoch the cursors were
// kept in (agentbridge.LogEpoch), and whether one was stored.
func (d *DB) BridgeEpoch(ctx context.Context) (int64, bool, error) {
	v, found, err := d.readCursor(ctx, cursorEpoch)
	if err != nil {
		return 0, false, fmt.Errorf("read the bridge's epoch: %w", err)
	}
	return v, found, nil
}

// SetBridgeEpoch records the bridge log's epoch the cursors are kept in.
func (d *DB) SetBridgeEpoch(ctx context.Context, epoch int64) error {
	if err := putCursor(ctx, d.db, d.db.owner, cursorEpoch, epoch); err != nil {
		return fmt.Errorf("record the bridge's epoch: %w", err)
	}
	return nil
}

// Rebase moves the cursors to a bridge log that was restored from an older
// backup, in one transaction: the global cursor to gseq (the point up to
// which the restored log is the one processed), the epoch to epoch (0
// leaves it), and every thread cursor is dropped, since the events after
// gseq, whatever their seqs, are new. It returns how many thread cursors
// were dropped.
func (d *DB) Rebase(ctx context.Context, gseq, epoch int64) (int64, error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("rebase cursors: %w", err)
	}
	defer tx.Rollback()
	if err := setCursor(ctx, tx, tx.owner, gseq); err != nil {
		return 0, err
	}
	if epoch != 0 {
		if err := putCursor(ctx, tx, tx.owner, cursorEpoch, epoch); err != nil {
			return 0, fmt.Errorf("rebase cursors: record the epoch: %w", err)
		}
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM thread_cursors WHERE owner = ?`, tx.owner)
	if err != nil {
		return 0, fmt.Errorf("rebase cursors: drop the thread cursors: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("rebase cursors: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("rebase cursors: commit: %w", err)
	}
	return n, nil
}

// ThreadCursor returns the seq of the thread's last processed event.
func (d *DB) ThreadCursor(ctx context.Context, thread string) (int64, bool, error) {
	var v int64
	err := d.db.QueryRowContext(ctx, `SELECT seq FROM thread_cursors WHERE owner = ? AND thread = ?`, d.db.owner, thread).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read thread cursor: %w", err)
	}
	return v, true, nil
}

// MarkRunning records that the adapter process started, with what a
// restarted coordinator needs to kill its group if it is still alive.
func (d *DB) MarkRunning(ctx context.Context, id int64, pid, pgid int, started time.Time) error {
	ts := agentbridge.FormatTime(started)
	// A cancel that won the race before the start keeps its status.
	_, err := d.db.ExecContext(ctx, `UPDATE invocations SET status = CASE WHEN status = ? THEN status ELSE ? END,
		pid = ?, pgid = ?, started_at = ?, process_started_at = ?, exit_code = NULL,
		error = CASE WHEN status = ? THEN error ELSE '' END WHERE id = ?`,
		StatusCancelled, StatusRunning, pid, pgid, ts, ts, StatusCancelled, id)
	if err != nil {
		return fmt.Errorf("mark invocation %d running: %w", id, err)
	}
	return nil
}

// Outcome is how an adapter run ended and what must be posted for it.
type Outcome struct {
	Status      string
	ExitCode    *int
	Error       string
	Started     time.Time
	Finished    time.Time
	OutputBytes int64
	StderrTail  string
	// ProgressBad counts the progress lines that were not records.
	ProgressBad int64
	// Posts are the events to append in order (a reply or an error
	// message, or a scene turn's thinking and speech); empty when nothing
	// is to be posted. Finish stores them as the row's pending post.
	Posts []agentbridge.EventInput
	// Journal, when set, is appended to the participant's journal in the
	// same transaction as the outcome, so that it is kept exactly once.
	Journal *JournalEntry
	// Failure is why the run failed (nil for a run that did not), and
	// HandedTo the fallback the trigger goes to instead (contract 8.5).
	Failure  *agentbridge.Failure
	HandedTo string
}

// ErrCancelled is returned by Finish when the invocation was cancelled
// before its outcome was recorded: the cancel wins, nothing is to be posted.
var ErrCancelled = errors.New("the invocation was cancelled")

// Finish records the end of an adapter run, and the event still to post,
// before it is posted: a crash after this point re-posts the same event
// with the same idempotency key instead of running the adapter again.
//
// An invocation already cancelled keeps its status and gets no post (the
// run's facts are still recorded); Finish then returns ErrCancelled. The
// check and the update are one statement, so a cancel and a finish that
// race have exactly one winner.
func (d *DB) Finish(ctx context.Context, id int64, o Outcome) error {
	if o.Journal == nil {
		// The update is the whole of it and needs no transaction around
		// it, so no BEGIN and COMMIT stand between an adapter's end and
		// the post of its reply.
		return finishUpdate(ctx, d.db, id, o)
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("finish invocation %d: begin: %w", id, err)
	}
	defer tx.Rollback()
	err = finishUpdate(ctx, tx, id, o)
	if err == nil {
		// A cancelled run (ErrCancelled) keeps no journal entry.
		j := o.Journal
		if _, err := tx.ExecContext(ctx, `INSERT INTO journals (invocation_id, participant, thread, thread_name, created_at, entry)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (invocation_id) DO NOTHING`,
			id, j.Participant, j.Thread, j.ThreadName, agentbridge.FormatTime(o.Finished), j.Entry); err != nil {
			return fmt.Errorf("append journal entry of invocation %d: %w", id, err)
		}
	} else if !errors.Is(err, ErrCancelled) {
		return err
	}
	if cerr := tx.Commit(); cerr != nil {
		return fmt.Errorf("finish invocation %d: commit: %w", id, cerr)
	}
	return err
}

// querier is a conn or a txn.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// finishUpdate is Finish's update of the invocation's row; it returns
// ErrCancelled when the row says cancelled.
//
// The rows are read to their end and their error checked, rather than
// through QueryRow's Scan: outside a transaction SQLite commits the update
// when the statement finishes, and a commit that fails (a full disk) is
// reported by that last step, which Scan never takes.
func finishUpdate(ctx context.Context, q querier, id int64, o Outcome) error {
	post, err := encodePosts(o.Posts)
	if err != nil {
		return fmt.Errorf("finish invocation %d: %w", id, err)
	}
	var started string
	if !o.Started.IsZero() {
		started = agentbridge.FormatTime(o.Started)
	}
	var dur int64
	if !o.Started.IsZero() && !o.Finished.IsZero() {
		dur = o.Finished.Sub(o.Started).Milliseconds()
	}
	rows, err := q.QueryContext(ctx, `UPDATE invocations SET
		status = CASE WHEN status = ? THEN status ELSE ? END, exit_code = ?,
		error = CASE WHEN status = ? THEN error ELSE ? END,
		started_at = CASE WHEN ? = '' THEN started_at ELSE ? END, finished_at = ?, duration_ms = ?,
		output_bytes = ?, stderr_tail = ?, progress_bad = ?, failure_class = ?, retry_at = ?, handed_to = ?,
		pending_post = CASE WHEN status = ? THEN '' ELSE ? END WHERE id = ? RETURNING status`,
		StatusCancelled, o.Status, o.ExitCode, StatusCancelled, o.Error, started, started,
		agentbridge.FormatTime(o.Finished), dur, o.OutputBytes, o.StderrTail, o.ProgressBad,
		o.failureClass(), o.retryAt(), o.HandedTo,
		StatusCancelled, post, id)
	if err != nil {
		return fmt.Errorf("finish invocation %d: %w", id, err)
	}
	status, err := lastString(rows)
	if err != nil {
		return fmt.Errorf("finish invocation %d: %w", id, err)
	}
	if status == StatusCancelled {
		return ErrCancelled
	}
	return nil
}

// lastString reads a one-column result to its end and returns its last
// value; a statement that returned no row is sql.ErrNoRows. Reading to the
// end is what reports an error of the statement's last step (its commit),
// and Close's error is checked too.
func lastString(rows *sql.Rows) (v string, err error) {
	n := 0
	for rows.Next() {
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return "", err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return "", err
	}
	if err := rows.Close(); err != nil {
		return "", err
	}
	if n == 0 {
		return "", sql.ErrNoRows
	}
	return v, nil
}

// Posted records the bridge's answer to the pending post: the event id it
// was stored as, or (for a refusal) the final status and the error.
func (d *DB) Posted(ctx context.Context, id int64, eventID, status, errText string) error {
	_, err := d.db.ExecContext(ctx, `UPDATE invocations SET reply_event_id = ?, pending_post = '',
		status = CASE WHEN ? = '' THEN status ELSE ? END,
		error = CASE WHEN ? = '' THEN error ELSE ? END WHERE id = ?`,
		eventID, status, status, errText, errText, id)
	if err != nil {
		return fmt.Errorf("record post of invocation %d: %w", id, err)
	}
	return nil
}

// SetStatus changes an invocation's status, for shutdown (interrupted) and
// for recovery (a pair whose reply was already in the thread), unless it was
// cancelled.
func (d *DB) SetStatus(ctx context.Context, id int64, status, errText string) error {
	// A cancelled invocation stays cancelled: it is final.
	_, err := d.db.ExecContext(ctx, `UPDATE invocations SET status = ?, error = ? WHERE id = ? AND status != ?`,
		status, errText, id, StatusCancelled)
	if err != nil {
		return fmt.Errorf("set invocation %d status: %w", id, err)
	}
	return nil
}

const invocationColumns = `id, thread, trigger_id, trigger_seq, trigger_gseq, participant, agent, command, hop,
	status, exit_code, error, queued_at, started_at, finished_at, duration_ms, reply_event_id, pending_post,
	output_bytes, stderr_tail, pid, pgid, process_started_at,
	input_tokens, output_tokens, cost_usd, progress_count, progress_bad, round, owner, claim_id, claim_fence, profile,
	failure_class, retry_at, handed_to, fallback_from`

func scanInvocations(rows *sql.Rows) ([]Invocation, error) {
	defer rows.Close()
	var out []Invocation
	for rows.Next() {
		var inv Invocation
		var cmd, pending, profile, failureClass, retryAt string
		var exit sql.NullInt64
		if err := rows.Scan(&inv.ID, &inv.Thread, &inv.TriggerID, &inv.TriggerSeq, &inv.TriggerGSeq,
			&inv.Participant, &inv.Agent, &cmd, &inv.Hop, &inv.Status, &exit, &inv.Error, &inv.QueuedAt,
			&inv.StartedAt, &inv.FinishedAt, &inv.DurationMS, &inv.ReplyEventID, &pending,
			&inv.OutputBytes, &inv.StderrTail, &inv.PID, &inv.PGID, &inv.ProcessStartedAt,
			&inv.InputTokens, &inv.OutputTokens, &inv.CostUSD, &inv.ProgressCount, &inv.ProgressBad, &inv.Round, &inv.Owner,
			&inv.ClaimID, &inv.ClaimFence, &profile, &failureClass, &retryAt, &inv.HandedTo, &inv.FallbackFrom); err != nil {
			return nil, fmt.Errorf("scan invocation: %w", err)
		}
		if err := json.Unmarshal([]byte(cmd), &inv.Command); err != nil {
			return nil, fmt.Errorf("decode command of invocation %d: %w", inv.ID, err)
		}
		if exit.Valid {
			c := int(exit.Int64)
			inv.ExitCode = &c
		}
		if pending != "" {
			inv.PendingPost = json.RawMessage(pending)
		}
		if failureClass != "" {
			inv.Failure = &agentbridge.Failure{Class: failureClass, RetryAt: retryAt}
		}
		if profile != "" {
			inv.Profile = new(agentbridge.Profile)
			if err := json.Unmarshal([]byte(profile), inv.Profile); err != nil {
				return nil, fmt.Errorf("decode profile of invocation %d: %w", inv.ID, err)
			}
		}
		out = append(out, inv)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read invocations: %w", err)
	}
	return out, nil
}

// Unfinished returns the invocations a restarted coordinator still owes a
// reply, in the order they were queued: its own, never those of another
// coordinator sharing the ledger (whose processes run on another machine).
func (d *DB) Unfinished(ctx context.Context) ([]Invocation, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+invocationColumns+` FROM invocations
		WHERE owner = ? AND (status IN (?, ?, ?) OR (pending_post != '' AND reply_event_id = '')) ORDER BY id`,
		d.db.owner, StatusQueued, StatusRunning, StatusInterrupted)
	if err != nil {
		return nil, fmt.Errorf("list unfinished invocations: %w", err)
	}
	return scanInvocations(rows)
}

// Filter selects invocation records; zero fields match everything.
type Filter struct {
	Thread      string
	Participant string
	Status      string
	// Limit caps the count (0 = 100).
	Limit int
}

// Invocations lists this coordinator's records matching f, newest first.
func (d *DB) Invocations(ctx context.Context, f Filter) ([]Invocation, error) {
	where := []string{"owner = ?"}
	args := []any{d.db.owner}
	if f.Thread != "" {
		where = append(where, "thread = ?")
		args = append(args, f.Thread)
	}
	if f.Participant != "" {
		where = append(where, "participant = ?")
		args = append(args, f.Participant)
	}
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, f.Status)
	}
	q := `SELECT ` + invocationColumns + ` FROM invocations WHERE ` + strings.Join(where, " AND ")
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit)
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list invocations: %w", err)
	}
	return scanInvocations(rows)
}

// Decision returns the recorded decision for an event, or ErrNotFound.
func (d *DB) Decision(ctx context.Context, eventID string) (DecisionRecord, error) {
	var dec DecisionRecord
	var js string
	err := d.db.QueryRowContext(ctx, `SELECT event_id, thread, seq, gseq, decision, created_at FROM decisions WHERE owner = ? AND event_id = ?`,
		d.db.owner, eventID).Scan(&dec.EventID, &dec.Thread, &dec.Seq, &dec.GSeq, &js, &dec.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return DecisionRecord{}, ErrNotFound
	}
	if err != nil {
		return DecisionRecord{}, fmt.Errorf("read decision: %w", err)
	}
	dec.Decision = json.RawMessage(js)
	return dec, nil
}

// PendingNotices returns the notices not yet acknowledged by the bridge.
// A row whose event no longer decodes is returned apart, in unreadable,
// with its key and the error: one bad row must not keep the coordinator
// from starting, nor the other notices from being posted.
func (d *DB) PendingNotices(ctx context.Context) (pending []Notice, unreadable []UnreadableNotice, err error) {
	rows, err := d.db.QueryContext(ctx, `SELECT trigger_id, kind, thread, post FROM notices WHERE owner = ? AND posted_event_id = '' ORDER BY rowid`, d.db.owner)
	if err != nil {
		return nil, nil, fmt.Errorf("list pending notices: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n Notice
		var post string
		if err := rows.Scan(&n.TriggerID, &n.Kind, &n.Thread, &post); err != nil {
			return nil, nil, fmt.Errorf("scan notice: %w", err)
		}
		if err := decodeNotice(&n, post); err != nil {
			unreadable = append(unreadable, UnreadableNotice{Notice: n, Err: err})
			continue
		}
		pending = append(pending, n)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read notices: %w", err)
	}
	return pending, unreadable, nil
}

// UnreadableNotice is a pending notice whose stored event does not decode:
// its key (TriggerID, Kind, Thread) and why.
type UnreadableNotice struct {
	Notice
	Err error
}

// NoticePosted records that the bridge stored a notice. An empty eventID
// means the bridge refused it for good (the thread was paused, say): the
// notice is closed with "-" so that it is not retried.
func (d *DB) NoticePosted(ctx context.Context, triggerID, kind, eventID string) error {
	if eventID == "" {
		eventID = "-"
	}
	_, err := d.db.ExecContext(ctx, `UPDATE notices SET posted_event_id = ? WHERE owner = ? AND trigger_id = ? AND kind = ?`, eventID, d.db.owner, triggerID, kind)
	if err != nil {
		return fmt.Errorf("record notice post: %w", err)
	}
	return nil
}

// failureClass and retryAt are the outcome's failure as its columns.
func (o Outcome) failureClass() string {
	if o.Failure == nil {
		return ""
	}
	return o.Failure.Class
}

func (o Outcome) retryAt() string {
	if o.Failure == nil {
		return ""
	}
	return o.Failure.RetryAt
}
