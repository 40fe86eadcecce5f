package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

var _ agentbridge.TokenStore = (*Store)(nil)

// CreateToken stores a token. Tokens are not events (no gseq), so, like
// receipts and suggestions, they skip the writer: one INSERT is the whole
// write.
func (s *Store) CreateToken(ctx context.Context, in agentbridge.TokenInput, hash []byte) (_ agentbridge.Token, err error) {
	defer s.guard(time.Now(), &err)
	if len(hash) == 0 {
		return agentbridge.Token{}, errors.New("create token: no hash")
	}
	now := time.Now()
	t := agentbridge.Token{
		// ulid.Make draws from a goroutine-safe entropy source: CreateToken
		// runs on the request's goroutine, not the writer's.
		ID: ulid.Make().String(), Name: in.Name, Scope: in.Scope, Thread: in.Thread,
		Participant: in.Participant, CreatedAt: agentbridge.FormatTime(now), CreatedBy: in.CreatedBy, Agents: strings.Join(in.Agents, ","),
	}
	if exp := in.Expiry(now); !exp.IsZero() {
		t.ExpiresAt = agentbridge.FormatTime(exp)
	}
	insert := func(ctx context.Context, q interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}) error {
		_, err := q.Exec(ctx, `INSERT INTO tokens (id, hash, name, scope, thread, participant, created_at, expires_at, revoked_at, created_by, agents) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, '', $9, $10)`,
			t.ID, hash, t.Name, t.Scope, t.Thread, t.Participant, t.CreatedAt, t.ExpiresAt, t.CreatedBy, t.Agents)
		if err != nil {
			return fmt.Errorf("insert token: %w", err)
		}
		return nil
	}
	if in.MaxLive <= 0 {
		return t, insert(ctx, s.pool)
	}
	// Capped: count and insert under a lock of the creator's count, so
	// that two bridges minting for one coordinator take turns.
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('agent-tokens:' || $1, 0))`, in.CreatedBy); err != nil {
			return fmt.Errorf("lock the live agent tokens' count: %w", err)
		}
		var n int
		if err := tx.QueryRow(ctx, fmt.Sprintf(storecore.LiveAgentTokens, "$1", "$2"), in.CreatedBy, t.CreatedAt).Scan(&n); err != nil {
			return fmt.Errorf("count live agent tokens: %w", err)
		}
		if n >= in.MaxLive {
			return agentbridge.TooManyAgentTokens(in.MaxLive)
		}
		return insert(ctx, tx)
	})
	if err != nil {
		return agentbridge.Token{}, err
	}
	return t, nil
}

// RevokeToken revokes token id: one UPDATE, which keeps the first
// revocation's time.
func (s *Store) RevokeToken(ctx context.Context, id string) (_ agentbridge.Token, err error) {
	defer s.guard(time.Now(), &err)
	if !agentbridge.TokenIDPattern.MatchString(id) {
		return agentbridge.Token{}, agentbridge.TokenNotFound(id)
	}
	t, err := storecore.ScanToken(s.pool.QueryRow(ctx,
		`UPDATE tokens SET revoked_at = CASE WHEN revoked_at = '' THEN $1 ELSE revoked_at END WHERE id = $2 RETURNING `+storecore.TokenColumns,
		agentbridge.FormatTime(time.Now()), id))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return agentbridge.Token{}, agentbridge.TokenNotFound(id)
	case err != nil:
		return agentbridge.Token{}, fmt.Errorf("revoke token: %w", err)
	}
	return t, nil
}

// TokenByHash returns the token whose secret hashes to hash.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (_ agentbridge.Token, _ bool, err error) {
	defer s.guard(time.Now(), &err)
	return storecore.LookupToken(s.pool.QueryRow(ctx, `SELECT `+storecore.TokenColumns+` FROM tokens WHERE hash = $1`, hash), "token")
}

// TokenByID returns token id.
func (s *Store) TokenByID(ctx context.Context, id string) (_ agentbridge.Token, _ bool, err error) {
	defer s.guard(time.Now(), &err)
	if !agentbridge.TokenIDPattern.MatchString(id) {
		return agentbridge.Token{}, false, nil
	}
	return storecore.LookupToken(s.pool.QueryRow(ctx, `SELECT `+storecore.TokenColumns+` FROM tokens WHERE id = $1`, id), "token "+id)
}

// PruneTokens deletes the tokens revoked or expired before cutoff (but
// serve's): one DELETE, as tokens skip the writer. The times are
// TimeLayout strings, fixed width, compared byte by byte (COLLATE "C").
func (s *Store) PruneTokens(ctx context.Context, cutoff time.Time) (_ int64, err error) {
	defer s.guard(time.Now(), &err)
	before := agentbridge.FormatTime(cutoff)
	tag, err := s.pool.Exec(ctx, `DELETE FROM tokens WHERE created_by <> $1 AND ((revoked_at <> '' AND revoked_at COLLATE "C" < $2) OR (expires_at <> '' AND expires_at COLLATE "C" < $2))`,
		agentbridge.CreatedByServe, before)
	if err != nil {
		return 0, fmt.Errorf("prune tokens: %w", err)
	}
	return tag.RowsAffected(), nil
}

// Tokens lists every token, oldest first.
func (s *Store) Tokens(ctx context.Context) (_ []agentbridge.Token, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.pool.Query(ctx, `SELECT `+storecore.TokenColumns+` FROM tokens ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "tokens", storecore.ScanToken)
}

// TokensAfter lists a page of tokens after position after, oldest first.
func (s *Store) TokensAfter(ctx context.Context, after int64, limit int) (_ []agentbridge.Token, _ []int64, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.pool.Query(ctx, fmt.Sprintf(storecore.TokensAfterQuery, "$1", "$2"), after, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	return storecore.CollectTokenPage(rows)
}

// CoordinatorTokenIDs lists the ids the coordinator tokens not revoked
// stand for.
func (s *Store) CoordinatorTokenIDs(ctx context.Context) (_ []string, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.pool.Query(ctx, storecore.CoordinatorTokenIDsQuery)
	if err != nil {
		return nil, fmt.Errorf("list coordinator tokens: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "coordinator tokens", storecore.ScanString)
}
