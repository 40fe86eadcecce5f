package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Party round stages (PartyRound.Stage): the round whose invocations are
// running, then done once the closing notice is owed.
const (
	PartyStageRound1 = 1
	PartyStageRound2 = 2
	PartyStageDone   = 3
)

// PartyRound is a party trigger's progress as this coordinator last
// acted on it: who was selected and how far the round has gone. The
// thread decides the round (the coordinator reads its replies and
// receipts); the row keeps that this coordinator queues its round-2 runs
// and owes the notice once. The coordinator moves it on only through
// AdvanceParty, which does so at most once per stage.
type PartyRound struct {
	TriggerID   string `json:"trigger_id"`
	Thread      string `json:"thread"`
	TriggerSeq  int64  `json:"trigger_seq"`
	TriggerGSeq int64  `json:"trigger_gseq"`
	// TriggerFrom is the human who started the round; the notice goes to
	// them.
	TriggerFrom string `json:"trigger_from"`
	Hop         int    `json:"hop"`
	CrossTalk   bool   `json:"cross_talk"`
	// Selected are round 1's participants, in selection order, whichever
	// coordinator serves each.
	Selected []string `json:"selected"`
	Stage    int      `json:"stage"`
}

// insertInvocations queues invs, skipping a (trigger, participant, round)
// already in the ledger, and returns those it queued with their ids.
func insertInvocations(ctx context.Context, tx *txn, invs []Invocation, now string) ([]Invocation, error) {
	var queued []Invocation
	for _, inv := range invs {
		cmd, err := json.Marshal(inv.Command)
		if err != nil {
			return nil, fmt.Errorf("encode command: %w", err)
		}
		var profile []byte
		if inv.Profile != nil {
			if profile, err = json.Marshal(inv.Profile); err != nil {
				return nil, fmt.Errorf("encode profile: %w", err)
			}
		}
		// RETURNING rather than LastInsertId, which PostgreSQL lacks; no
		// row comes back when the pair was queued before.
		err = tx.QueryRowContext(ctx, `INSERT INTO invocations
			(owner, thread, trigger_id, trigger_seq, trigger_gseq, participant, agent, command, hop, status, queued_at, round, profile)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (trigger_id, participant, round) DO NOTHING RETURNING id`,
			tx.owner, inv.Thread, inv.TriggerID, inv.TriggerSeq, inv.TriggerGSeq, inv.Participant, inv.Agent, string(cmd), inv.Hop, StatusQueued, now, inv.Round, string(profile)).Scan(&inv.ID)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("queue invocation: %w", err)
		}
		inv.Status, inv.QueuedAt, inv.Owner = StatusQueued, now, tx.owner
		queued = append(queued, inv)
	}
	return queued, nil
}

func insertNotices(ctx context.Context, tx *txn, notices []Notice) error {
	for _, n := range notices {
		post, err := encodeNotice(n)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO notices (owner, trigger_id, kind, thread, post) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (owner, trigger_id, kind) DO NOTHING`, tx.owner, n.TriggerID, n.Kind, n.Thread, post)
		if err != nil {
			return fmt.Errorf("record notice: %w", err)
		}
	}
	return nil
}

func insertPartyRound(ctx context.Context, tx *txn, r PartyRound, now string) error {
	sel, err := json.Marshal(r.Selected)
	if err != nil {
		return fmt.Errorf("encode party selection: %w", err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO party_rounds
		(owner, trigger_id, thread, trigger_seq, trigger_gseq, trigger_from, hop, cross_talk, selected, stage, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (owner, trigger_id) DO NOTHING`,
		tx.owner, r.TriggerID, r.Thread, r.TriggerSeq, r.TriggerGSeq, r.TriggerFrom, r.Hop, r.CrossTalk, string(sel), PartyStageRound1, now)
	if err != nil {
		return fmt.Errorf("record party round: %w", err)
	}
	return nil
}

const partyRoundColumns = `trigger_id, thread, trigger_seq, trigger_gseq, trigger_from, hop, cross_talk, selected, stage`

func scanPartyRound(row interface{ Scan(...any) error }) (PartyRound, error) {
	var r PartyRound
	var sel string
	if err := row.Scan(&r.TriggerID, &r.Thread, &r.TriggerSeq, &r.TriggerGSeq, &r.TriggerFrom, &r.Hop, &r.CrossTalk, &sel, &r.Stage); err != nil {
		return PartyRound{}, err
	}
	if err := json.Unmarshal([]byte(sel), &r.Selected); err != nil {
		return PartyRound{}, fmt.Errorf("decode party selection of %s: %w", r.TriggerID, err)
	}
	return r, nil
}

// PartyRoundOf returns a party trigger's round, or ErrNotFound.
func (d *DB) PartyRoundOf(ctx context.Context, triggerID string) (PartyRound, error) {
	r, err := scanPartyRound(d.db.QueryRowContext(ctx, `SELECT `+partyRoundColumns+` FROM party_rounds WHERE owner = ? AND trigger_id = ?`, d.db.owner, triggerID))
	if errors.Is(err, sql.ErrNoRows) {
		return PartyRound{}, ErrNotFound
	}
	if err != nil {
		return PartyRound{}, fmt.Errorf("read party round %s: %w", triggerID, err)
	}
	return r, nil
}

// OpenPartyRounds returns the party rounds that are not done, oldest
// first, for recovery.
func (d *DB) OpenPartyRounds(ctx context.Context) ([]PartyRound, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+partyRoundColumns+` FROM party_rounds WHERE owner = ? AND stage < ? ORDER BY trigger_gseq`, d.db.owner, PartyStageDone)
	if err != nil {
		return nil, fmt.Errorf("list open party rounds: %w", err)
	}
	defer rows.Close()
	var out []PartyRound
	for rows.Next() {
		r, err := scanPartyRound(rows)
		if err != nil {
			return nil, fmt.Errorf("scan party round: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read party rounds: %w", err)
	}
	return out, nil
}

// PartyInvocations returns a trigger's invocations of one party round, in
// queueing order.
func (d *DB) PartyInvocations(ctx context.Context, triggerID string, round int) ([]Invocation, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT `+invocationColumns+` FROM invocations WHERE owner = ? AND trigger_id = ? AND round = ? ORDER BY id`, d.db.owner, triggerID, round)
	if err != nil {
		return nil, fmt.Errorf("list party invocations: %w", err)
	}
	return scanInvocations(rows)
}

// AdvanceParty moves a party round from stage from to stage to, queueing
// invs (the next round's invocations) and recording notices, in one
// transaction. Only the first caller for a stage advances it: a later or
// concurrent one gets ok false and changes nothing, so each round starts
// once and the notice is owed once, even when the last two invocations of
// a round finish together.
func (d *DB) AdvanceParty(ctx context.Context, triggerID string, from, to int, invs []Invocation, notices []Notice) (queued []Invocation, ok bool, err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE party_rounds SET stage = ? WHERE owner = ? AND trigger_id = ? AND stage = ?`, to, tx.owner, triggerID, from)
	if err != nil {
		return nil, false, fmt.Errorf("advance party round %s: %w", triggerID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, false, nil
	}
	queued, err = insertInvocations(ctx, tx, invs, agentbridge.FormatTime(time.Now()))
	if err != nil {
		return nil, false, err
	}
	if err := insertNotices(ctx, tx, notices); err != nil {
		return nil, false, err
	}
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("commit: %w", err)
	}
	return queued, true, nil
}
