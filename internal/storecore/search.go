package storecore

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// What both stores index of an event for search (contract 8.6), and the
// migration that indexes the events stored before the index existed.

// Filter tokens: one token per event for each filter (the thread, the
// sender, the type), a letter and the value in hex, so that an id with
// punctuation is still one token and a filter is exact.
const (
	tokThread = 't'
	tokSender = 's'
	tokType   = 'y'
)

// FilterToken is the filter token of value v of kind (tokThread …).
func FilterToken(kind byte, v string) string {
	return string(kind) + hex.EncodeToString([]byte(v))
}

// ThreadToken, SenderToken and TypeToken are the filter tokens of a
// thread id, a sender and an event type.
func ThreadToken(id string) string   { return FilterToken(tokThread, id) }
func SenderToken(from string) string { return FilterToken(tokSender, from) }
func TypeToken(typ string) string    { return FilterToken(tokType, typ) }

// SearchDoc is what the index holds of an event: its text and its filter
// tokens.
type SearchDoc struct {
	Body, Thread, Sender, Type string
}

// SearchDocOf is ev's document; ok is false when ev has no text to find,
// and is then not indexed (a query always has a word).
func SearchDocOf(ev agentbridge.Event) (doc SearchDoc, ok bool) {
	body := agentbridge.SearchText(ev)
	if body == "" {
		return SearchDoc{}, false
	}
	return SearchDoc{Body: body, Thread: ThreadToken(ev.Thread), Sender: SenderToken(ev.From), Type: TypeToken(ev.Type)}, true
}

// BackfillChunk is how many events one transaction of the search
// migration indexes: a few hundred milliseconds of work, so that a stop
// loses little and a PostgreSQL bridge appending meanwhile waits little.
const BackfillChunk = 5000

// BackfillStep indexes the next chunk of the events stored before the
// index, in one transaction with the progress it records, and returns the
// progress: the last gseq indexed before it (from), after it (done), and
// the last one to index.
type BackfillStep func(ctx context.Context) (from, done, target int64, err error)

// Backfill runs step until the migration is done, logging where it starts
// (or resumes), its progress at most every few seconds, and its end. It
// returns at once when there is nothing to do.
func Backfill(ctx context.Context, log *slog.Logger, step BackfillStep) error {
	start := time.Now()
	last := start
	first := true
	var from int64
	for {
		before, done, target, err := step(ctx)
		if err != nil {
			return fmt.Errorf("index events for search: %w", err)
		}
		if first {
			first = false
			if before >= target {
				return nil
			}
			from = before
			log.Info("indexing the events stored before search; the bridge starts when it is done, and a stop resumes where it was",
				"from_gseq", before, "of", target)
		}
		if done >= target {
			log.Info("search index complete", "events", target-from, "took", time.Since(start).Round(time.Millisecond))
			return nil
		}
		if time.Since(last) >= 2*time.Second {
			last = time.Now()
			log.Info("indexing events for search", "through_gseq", done, "of", target, "percent", done*100/max(target, 1))
		}
	}
}

// ScanEvents reads rows of EventColumns.
func ScanEvents(rows Rows) ([]agentbridge.Event, error) {
	var out []agentbridge.Event
	for rows.Next() {
		ev, err := ScanEvent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}

// rankRow scans a row of EventColumns followed by a rank.
type rankRow struct {
	Rows
	rank *float64
}

func (r rankRow) Scan(dest ...any) error { return r.Rows.Scan(append(dest, r.rank)...) }

// ScanHits reads rows of EventColumns followed by the rank.
func ScanHits(rows Rows) ([]agentbridge.SearchHit, error) {
	var out []agentbridge.SearchHit
	for rows.Next() {
		var h agentbridge.SearchHit
		ev, err := ScanEvent(rankRow{rows, &h.Rank})
		if err != nil {
			return nil, fmt.Errorf("read search hit: %w", err)
		}
		h.Event = ev
		out = append(out, h)
	}
	return out, rows.Err()
}

// ScanStrings reads rows of one text column.
func ScanStrings(rows Rows) ([]string, error) {
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
