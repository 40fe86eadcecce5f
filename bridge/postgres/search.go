// Search (contract 8.6): the tsvector each event's append writes
// (write), the migration of the events stored before it, the query, the
// threads an agent may search.

package postgres

import (
	"context"
	"fmt"
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
const hitColumns = `e.gseq, e.id, e.thread, e.seq, e.ts, e.type, e.sender, e.recipient, e.content, e.meta`

// Search answers req from the GIN index, newest first; the rank is the
// bridge's (agentbridge.SearchRank), as on SQLite.
func (s *Store) Search(ctx context.Context, req agentbridge.SearchRequest) (_ []agentbridge.SearchHit, err error) {
	defer s.guard(time.Now(), &err)
	if req.Threads != nil && len(req.Threads) == 0 {
		return nil, nil
	}
	args := []any{tsqueryOf(req)}
	q := `SELECT ` + hitColumns + `, 0.0::float8 FROM event_search x JOIN events e ON e.gseq = x.gseq
		WHERE x.tsv @@ $1::tsquery`
	add := func(cond string, v any) {
		args = append(args, v)
		q += fmt.Sprintf(" AND "+cond, len(args))
	}
	if req.Cursor > 0 {
		add("x.gseq < $%d", req.Cursor)
	}
	if req.After != "" {
		add("e.ts >= $%d", req.After)
	}
	if req.Before != "" {
		add("e.ts < $%d", req.Before)
	}
	if req.From != "" {
		add("e.sender = $%d", req.From)
	}
	if req.Type != "" {
		add("e.type = $%d", req.Type)
	}
	args = append(args, req.Limit)
	q += fmt.Sprintf(" ORDER BY x.gseq DESC LIMIT $%d", len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	defer rows.Close()
	return storecore.ScanHits(rows)
}

// ThreadsInvited lists the threads whose current state invites
// participant.
func (s *Store) ThreadsInvited(ctx context.Context, participant string) (_ []string, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.pool.Query(ctx, `SELECT id FROM threads
		WHERE (state::jsonb) -> 'participants' -> 'invited' @> jsonb_build_array(jsonb_build_object('id', $1::text))
		ORDER BY id`, participant)
	if err != nil {
		return nil, fmt.Errorf("threads invited: %w", err)
	}
	defer rows.Close()
	return storecore.ScanStrings(rows)
}
