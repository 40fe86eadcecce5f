package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

var _ agentbridge.TokenStore = (*Store)(nil)

// tokenWrite is a token change the writer applies: a new token when hash
// is set, else the revocation of id.
type tokenWrite struct {
	in   agentbridge.TokenInput
	hash []byte
	id   string
}

// CreateToken stores a token through the writer (the one connection that
// writes), with Append's ctx rules.
func (s *Store) CreateToken(ctx context.Context, in agentbridge.TokenInput, hash []byte) (_ agentbridge.Token, err error) {
	defer s.guard(time.Now(), &err)
	if len(hash) == 0 {
		return agentbridge.Token{}, errors.New("create token: no hash")
	}
	r := s.newRequest(ctx)
	r.token = &tokenWrite{in: in, hash: hash}
	resp := s.submit(ctx, r)
	return resp.token, resp.err
}

// RevokeToken revokes token id through the writer, with Append's ctx
// rules.
func (s *Store) RevokeToken(ctx context.Context, id string) (_ agentbridge.Token, err error) {
	defer s.guard(time.Now(), &err)
	if !agentbridge.TokenIDPattern.MatchString(id) {
		return agentbridge.Token{}, agentbridge.TokenNotFound(id)
	}
	r := s.newRequest(ctx)
	r.token = &tokenWrite{id: id}
	resp := s.submit(ctx, r)
	return resp.token, resp.err
}

// writeToken runs inside a group commit (see apply). Its answer is marked
// as a token's, which keeps it out of the append counters.
func (s *Store) writeToken(ctx context.Context, w tokenWrite) (response, error) {
	now := time.Now()
	if w.hash == nil {
		t, err := storecore.ScanToken(s.w.conn.QueryRowContext(ctx,
			`UPDATE tokens SET revoked_at = CASE WHEN revoked_at = '' THEN ? ELSE revoked_at END WHERE id = ? RETURNING `+storecore.TokenColumns,
			agentbridge.FormatTime(now), w.id))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return response{isToken: true, err: agentbridge.TokenNotFound(w.id)}, nil
		case err != nil:
			return response{}, fmt.Errorf("revoke token: %w", err)
		}
		return response{isToken: true, token: t}, nil
	}
	u, err := ulid.New(ulid.Timestamp(now), s.w.entropy)
	if err != nil {
		return response{}, fmt.Errorf("new token id: %w", err)
	}
	t := agentbridge.Token{ID: u.String(), Name: w.in.Name, Scope: w.in.Scope, Thread: w.in.Thread,
		Participant: w.in.Participant, CreatedAt: agentbridge.FormatTime(now), CreatedBy: w.in.CreatedBy, Agents: strings.Join(w.in.Agents, ",")}
	if exp := w.in.Expiry(now); !exp.IsZero() {
		t.ExpiresAt = agentbridge.FormatTime(exp)
	}
	if w.in.MaxLive > 0 {
		// The one writer counts and inserts in turn: the cap holds.
		var n int
		if err := s.w.conn.QueryRowContext(ctx, fmt.Sprintf(storecore.LiveAgentTokens, "?", "?"), w.in.CreatedBy, t.CreatedAt).Scan(&n); err != nil {
			return response{}, fmt.Errorf("count live agent tokens: %w", err)
		}
		if n >= w.in.MaxLive {
			return response{isToken: true, err: agentbridge.TooManyAgentTokens(w.in.MaxLive)}, nil
		}
	}
	if _, err := s.w.conn.ExecContext(ctx, `INSERT INTO tokens (id, hash, name, scope, thread, participant, created_at, expires_at, revoked_at, created_by, agents) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?)`,
		t.ID, w.hash, t.Name, t.Scope, t.Thread, t.Participant, t.CreatedAt, t.ExpiresAt, t.CreatedBy, t.Agents); err != nil {
		return response{}, fmt.Errorf("insert token: %w", err)
	}
	return response{isToken: true, token: t}, nil
}

// TokenByHash returns the token whose secret hashes to hash.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (_ agentbridge.Token, _ bool, err error) {
	defer s.guard(time.Now(), &err)
	return storecore.LookupToken(s.rdb.QueryRowContext(ctx, `SELECT `+storecore.TokenColumns+` FROM tokens WHERE hash = ?`, hash), "token")
}

// TokenByID returns token id.
func (s *Store) TokenByID(ctx context.Context, id string) (_ agentbridge.Token, _ bool, err error) {
	defer s.guard(time.Now(), &err)
	if !agentbridge.TokenIDPattern.MatchString(id) {
		return agentbridge.Token{}, false, nil
	}
	return storecore.LookupToken(s.rdb.QueryRowContext(ctx, `SELECT `+storecore.TokenColumns+` FROM tokens WHERE id = ?`, id), "token "+id)
}

// PruneTokens deletes the tokens revoked or expired before cutoff (but
// serve's) through the writer, as every write. The times are TimeLayout
// strings, fixed width, so they compare as text.
func (s *Store) PruneTokens(ctx context.Context, cutoff time.Time) (n int64, err error) {
	defer s.guard(time.Now(), &err)
	before := agentbridge.FormatTime(cutoff)
	err = s.side(ctx, func(ctx context.Context, conn *sql.Conn) error {
		res, err := conn.ExecContext(ctx, `DELETE FROM tokens WHERE created_by <> ? AND ((revoked_at <> '' AND revoked_at < ?) OR (expires_at <> '' AND expires_at < ?))`,
			agentbridge.CreatedByServe, before, before)
		if err != nil {
			return fmt.Errorf("prune tokens: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// Tokens lists every token, oldest first.
func (s *Store) Tokens(ctx context.Context) (_ []agentbridge.Token, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+storecore.TokenColumns+` FROM tokens ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "tokens", storecore.ScanToken)
}

// TokensAfter lists a page of tokens after position after, oldest first.
func (s *Store) TokensAfter(ctx context.Context, after int64, limit int) (_ []agentbridge.Token, _ []int64, err error) {
	defer s.guard(time.Now(), &err)
	rows, err := s.rdb.QueryContext(ctx, fmt.Sprintf(storecore.TokensAfterQuery, "?", "?"), after, limit)
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
	rows, err := s.rdb.QueryContext(ctx, storecore.CoordinatorTokenIDsQuery)
	if err != nil {
		return nil, fmt.Errorf("list coordinator tokens: %w", err)
	}
	defer rows.Close()
	return storecore.Collect(rows, "coordinator tokens", storecore.ScanString)
}
