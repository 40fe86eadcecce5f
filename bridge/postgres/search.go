// Search (contract 8.6): the tsvector each event's append writes
// (write), the migration of the events stored before it, the query, the
// threads an agent may search.

package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

var _ agentbridge.SearchStore = (*Store)(nil)

// PostgreSQL's limits on a tsvector's lexemes: their length in bytes and
// the positions kept per lexeme; positions above maxPos are kept as
// maxPos.
const (
	maxLexeme    = 2046
	maxPositions = 256
	maxPos       = 16383
)

// tsvectorOf is the tsvector literal of doc: the body's tokens with their
// positions (weight D, the default), the filter tokens at position 1
// with weight A. Tokens are letters and digits only, so they need no
// escape inside their quotes.
func tsvectorOf(doc storecore.SearchDoc) string {
	positions := map[string][]int{}
	var order []string
	for i, tok := range agentbridge.SearchTokens(doc.Body) {
		if len(tok) > maxLexeme {
			continue
		}
		p, seen := positions[tok]
		if !seen {
			order = append(order, tok)
		}
		if len(p) < maxPositions {
			positions[tok] = append(p, min(i+1, maxPos))
		}
	}
	var b strings.Builder
	for _, tok := range order {
		b.WriteString("'" + tok + "':")
		for i, p := range positions[tok] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(p))
		}
		b.WriteByte(' ')
	}
	for _, f := range []string{doc.Thread, doc.Sender, doc.Type} {
		b.WriteString("'" + f + "':1A ")
	}
	return b.String()
}

// tsqueryOf is req's tsquery literal: every term on the body (weight D),
// a phrase's tokens one after another (<->), a prefix :*, and the
// filters' tokens (weight A).
func tsqueryOf(req agentbridge.SearchRequest) string {
	var parts []string
	for _, t := range req.Query.Terms {
		toks := make([]string, len(t.Tokens))
		for i, tok := range t.Tokens {
			toks[i] = "'" + tok + "':D"
			if t.Prefix && i == len(t.Tokens)-1 {
				toks[i] = "'" + tok + "':*D"
			}
		}
		parts = append(parts, "("+strings.Join(toks, " <-> ")+")")
	}
	if req.Threads != nil {
		alts := make([]string, len(req.Threads))
		for i, id := range req.Threads {
			alts[i] = "'" + storecore.ThreadToken(id) + "':A"
		}
		parts = append(parts, "("+strings.Join(alts, " | ")+")")
	}
	if req.From != "" {
		parts = append(parts, "'"+storecore.SenderToken(req.From)+"':A")
	}
	if req.Type != "" {
		parts = append(parts, "'"+storecore.TypeToken(req.Type)+"':A")
	}
	return strings.Join(parts, " & ")
}

// index queues the search rows of the batch's events: gseqs and tsvectors
// for one INSERT … unnest.
func indexBatch(pb *pgx.Batch, events []agentbridge.Event) {
	var gseqs []int64
	var tsvs []string
	for _, ev := range events {
		doc, ok := storecore.SearchDocOf(ev)
		if !ok {
			continue
		}
		gseqs, tsvs = append(gseqs, ev.GSeq), append(tsvs, tsvectorOf(doc))
	}
	if len(gseqs) > 0 {
		pb.Queue(`INSERT INTO event_search (gseq, tsv) SELECT * FROM unnest($1::bigint[], $2::text[]::tsvector[])`, gseqs, tsvs)
	}
}

// backfill indexes the events stored before the index (migration 0011),
// a chunk per transaction that locks the progress row, so that two
// bridges starting at once take turns.
func backfill(ctx context.Context, pool *pgxpool.Pool, opts storecore.Options) error {
	return storecore.Backfill(ctx, opts.Logger, func(ctx context.Context) (from, done, target int64, err error) {
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT done, target FROM search_backfill FOR UPDATE`).Scan(&done, &target); err != nil {
				return err
			}
			from = done
			if done >= target {
				return nil
			}
			upto := min(done+storecore.BackfillChunk, target)
			rows, err := tx.Query(ctx, selectEvent+` WHERE gseq > $1 AND gseq <= $2 ORDER BY gseq`, done, upto)
			if err != nil {
				return err
			}
			evs, err := storecore.ScanEvents(rows)
			rows.Close()
			if err != nil {
				return err
			}
			var pb pgx.Batch
			indexBatch(&pb, evs)
			pb.Queue(`UPDATE search_backfill SET done = $1`, upto)
			if err := tx.SendBatch(ctx, &pb).Close(); err != nil {
				return err
			}
			done = upto
			return nil
		})
		return from, done, target, err
	})
}

// hitColumns are the event's columns (of events e) and the rank, which
// storecore.ScanHits reads.
const hitColumns = `e.gseq, e.id, e.thread, e.seq, e.ts, e.type, e.sender, e.recipient, e.content, e.meta, 0.0::float8`

// How a search walks the newest events before it turns to the GIN index
// (docs/storage.md, "Search"). The planner alone cannot be trusted with
// ORDER BY gseq DESC LIMIT: it walks the primary key backwards for words
// it thinks common enough, and its guess for a word it has no statistics
// of makes it walk the whole table (4 s over 1M events for a word that
// is not there); the GIN index, for its part, must fetch and recheck
// every match, which for a common word is most of the table. So the
// store walks first, a bounded number of rows, and looks up the rest in
// the index only when the walk shows the words to be rare.
const (
	// searchWalk is how many of the newest index rows the first walk
	// reads (searchThreadWalk: of the one thread's events, for a thread
	// filter): a few milliseconds.
	searchWalk       = 1000
	searchThreadWalk = 100
	// searchWalkOn is how many matches the first walk must find for the
	// store to walk on (they say the words are common enough that the
	// rest is near), for twice the rows the rate found suggests, at most
	// searchWalkMax.
	searchWalkOn  = 3
	searchWalkMax = 50000
)

// Search answers req newest first: a walk of the newest events, on when
// it finds the words often, then the GIN index for the rest; the rank is
// the bridge's (agentbridge.SearchRank), as on SQLite.
func (s *Store) Search(ctx context.Context, req agentbridge.SearchRequest) (_ []agentbridge.SearchHit, err error) {
	defer s.Guard(time.Now(), &err)
	if req.Threads != nil && len(req.Threads) == 0 {
		return nil, nil
	}
	tsq := tsqueryOf(req)
	hi := int64(math.MaxInt64)
	if req.Cursor > 0 {
		hi = req.Cursor
	}
	size := searchWalk
	if len(req.Threads) == 1 {
		size = searchThreadWalk
	}
	hits, lo, full, err := s.walk(ctx, req, tsq, hi, size, req.Limit)
	if err != nil || len(hits) >= req.Limit || !full {
		return hits, err
	}
	if found := len(hits); found >= searchWalkOn {
		more, lo2, full, err := s.walk(ctx, req, tsq, lo, min(2*(req.Limit-found)*size/found, searchWalkMax), req.Limit-found)
		hits = append(hits, more...)
		if err != nil || len(hits) >= req.Limit || !full {
			return hits, err
		}
		lo = lo2
	}
	more, err := s.lookUp(ctx, req, tsq, lo, req.Limit-len(hits))
	return append(hits, more...), err
}

// searchSQL builds one statement of a search: its arguments, numbered as
// they are added.
type searchSQL struct {
	req  agentbridge.SearchRequest
	args []any
}

// arg adds v and returns its placeholder.
func (b *searchSQL) arg(v any) string {
	b.args = append(b.args, v)
	return "$" + strconv.Itoa(len(b.args))
}

// filters are the request's conditions on the event e. The sender and
// type are filter tokens of the index already; their columns keep the
// answer right whatever the index holds.
func (b *searchSQL) filters() string {
	var f strings.Builder
	for _, c := range []struct{ cond, v string }{
		{"e.ts >= ", b.req.After}, {"e.ts < ", b.req.Before}, {"e.sender = ", b.req.From}, {"e.type = ", b.req.Type},
	} {
		if c.v != "" {
			f.WriteString(" AND " + c.cond + b.arg(c.v))
		}
	}
	return f.String()
}

// window is the statement of the n newest candidates below gseq hi, in
// gseq order: index rows, or, for a request of one thread, that thread's
// indexed events (its seq follows gseq).
func (b *searchSQL) window(hi int64, n int) string {
	if len(b.req.Threads) == 1 {
		return `SELECT x.gseq, x.tsv FROM events t JOIN event_search x ON x.gseq = t.gseq WHERE t.thread = ` + b.arg(b.req.Threads[0]) +
			` AND t.gseq < ` + b.arg(hi) + ` ORDER BY t.seq DESC LIMIT ` + b.arg(n)
	}
	return `SELECT gseq, tsv FROM event_search WHERE gseq < ` + b.arg(hi) + ` ORDER BY gseq DESC LIMIT ` + b.arg(n)
}

// walk reads the size newest candidates below hi and returns their
// matches (at most want, newest first), the lowest gseq it read, and
// whether it read size (when not, nothing is left below). Both
// statements go in one round trip.
func (s *Store) walk(ctx context.Context, req agentbridge.SearchRequest, tsq string, hi int64, size, want int) (hits []agentbridge.SearchHit, lo int64, full bool, err error) {
	m := searchSQL{req: req}
	match := `SELECT ` + hitColumns + ` FROM (` + m.window(hi, size) + `) x JOIN events e ON e.gseq = x.gseq WHERE x.tsv @@ ` +
		m.arg(tsq) + `::tsquery` + m.filters() + ` ORDER BY x.gseq DESC LIMIT ` + m.arg(want)
	w := searchSQL{req: req}
	bound := `SELECT coalesce(min(gseq), 0), count(*) FROM (` + w.window(hi, size) + `) w`
	var pb pgx.Batch
	pb.Queue(match, m.args...)
	pb.Queue(bound, w.args...)
	br := s.pool.SendBatch(ctx, &pb)
	defer func() { err = errors.Join(err, br.Close()) }()
	rows, err := br.Query()
	if err != nil {
		return nil, 0, false, fmt.Errorf("search: walk: %w", err)
	}
	if hits, err = storecore.ScanHits(rows); err != nil {
		return nil, 0, false, fmt.Errorf("search: walk: %w", err)
	}
	var read int
	if err := br.QueryRow().Scan(&lo, &read); err != nil {
		return nil, 0, false, fmt.Errorf("search: walk's bound: %w", err)
	}
	return hits, lo, read == size, nil
}

// lookUp finds the want newest matches below gseq lo in the GIN index: a
// bitmap of the matches (ordering by gseq + 0 leaves the planner no
// ordered walk to choose instead), the newest kept, and only then their
// events read.
func (s *Store) lookUp(ctx context.Context, req agentbridge.SearchRequest, tsq string, lo int64, want int) ([]agentbridge.SearchHit, error) {
	b := searchSQL{req: req}
	inner := `SELECT x.gseq FROM event_search x`
	cond := ` WHERE x.tsv @@ ` + b.arg(tsq) + `::tsquery AND x.gseq < ` + b.arg(lo)
	if f := b.filters(); f != "" {
		inner += ` JOIN events e ON e.gseq = x.gseq`
		cond += f
	}
	q := `SELECT ` + hitColumns + ` FROM (` + inner + cond + ` ORDER BY x.gseq + 0 DESC LIMIT ` + b.arg(want) +
		`) m JOIN events e ON e.gseq = m.gseq ORDER BY e.gseq DESC`
	rows, err := s.pool.Query(ctx, q, b.args...)
	if err != nil {
		return nil, fmt.Errorf("search: look up: %w", err)
	}
	defer rows.Close()
	return storecore.ScanHits(rows)
}

// ThreadsInvited lists the threads whose current state invites
// participant.
func (s *Store) ThreadsInvited(ctx context.Context, participant string) (_ []string, err error) {
	defer s.Guard(time.Now(), &err)
	rows, err := s.pool.Query(ctx, `SELECT id FROM threads
		WHERE (state::jsonb) -> 'participants' -> 'invited' @> jsonb_build_array(jsonb_build_object('id', $1::text))
		ORDER BY id`, participant)
	if err != nil {
		return nil, fmt.Errorf("threads invited: %w", err)
	}
	defer rows.Close()
	return storecore.ScanStrings(rows)
}
