package storecore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

var _ agentbridge.TokenStore = (*Engine)(nil)

// CreateToken stores a token in one write; a capped agent token is counted
// and inserted under a lock of its creator's count, so that two bridges
// minting for one coordinator take turns.
func (e *Engine) CreateToken(ctx context.Context, in agentbridge.TokenInput, hash []byte) (_ agentbridge.Token, err error) {
	defer e.Guard(time.Now(), &err)
	if len(hash) == 0 {
		return agentbridge.Token{}, errors.New("create token: no hash")
	}
	now := time.Now()
	t := agentbridge.Token{
		// ulid.Make draws from a goroutine-safe entropy source.
		ID: ulid.Make().String(), Name: in.Name, Scope: in.Scope, Thread: in.Thread,
		Participant: in.Participant, CreatedAt: agentbridge.FormatTime(now), CreatedBy: in.CreatedBy, Agents: strings.Join(in.Agents, ","),
	}
	if exp := in.Expiry(now); !exp.IsZero() {
		t.ExpiresAt = agentbridge.FormatTime(exp)
	}
	err = e.Write(ctx, func(ctx context.Context, c Conn) error {
		if in.MaxLive > 0 {
			if err := e.lock(ctx, c, "agent-tokens:"+in.CreatedBy); err != nil {
				return err
			}
			var n int
			if err := c.QueryRow(ctx, LiveAgentTokens, in.CreatedBy, t.CreatedAt).Scan(&n); err != nil {
				return fmt.Errorf("count live agent tokens: %w", err)
			}
			if n >= in.MaxLive {
				return agentbridge.TooManyAgentTokens(in.MaxLive)
			}
		}
		if _, err := c.Exec(ctx, `INSERT INTO tokens (id, hash, name, scope, thread, participant, created_at, expires_at, revoked_at, created_by, agents) VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', ?, ?)`,
			t.ID, hash, t.Name, t.Scope, t.Thread, t.Participant, t.CreatedAt, t.ExpiresAt, t.CreatedBy, t.Agents); err != nil {
			return fmt.Errorf("insert token: %w", err)
		}
		return nil
	})
	if err != nil {
		return agentbridge.Token{}, err
	}
	return t, nil
}

// RevokeToken revokes token id: one UPDATE, which keeps the first
// revocation's time.
func (e *Engine) RevokeToken(ctx context.Context, id string) (_ agentbridge.Token, err error) {
	defer e.Guard(time.Now(), &err)
	if !agentbridge.TokenIDPattern.MatchString(id) {
		return agentbridge.Token{}, agentbridge.TokenNotFound(id)
	}
	var t agentbridge.Token
	err = e.Write(ctx, func(ctx context.Context, c Conn) error {
		var err error
		t, err = ScanToken(c.QueryRow(ctx,
			`UPDATE tokens SET revoked_at = CASE WHEN revoked_at = '' THEN ? ELSE revoked_at END WHERE id = ? RETURNING `+TokenColumns,
			agentbridge.FormatTime(time.Now()), id))
		if found, err := Found(err); err != nil {
			return fmt.Errorf("revoke token: %w", err)
		} else if !found {
			return agentbridge.TokenNotFound(id)
		}
		return nil
	})
	return t, err
}

// TokenByHash returns the token whose secret hashes to hash.
func (e *Engine) TokenByHash(ctx context.Context, hash []byte) (_ agentbridge.Token, _ bool, err error) {
	defer e.Guard(time.Now(), &err)
	return LookupToken(e.Read.QueryRow(ctx, `SELECT `+TokenColumns+` FROM tokens WHERE hash = ?`, hash), "token")
}

// TokenByID returns token id.
func (e *Engine) TokenByID(ctx context.Context, id string) (_ agentbridge.Token, _ bool, err error) {
	defer e.Guard(time.Now(), &err)
	if !agentbridge.TokenIDPattern.MatchString(id) {
		return agentbridge.Token{}, false, nil
	}
	return LookupToken(e.Read.QueryRow(ctx, `SELECT `+TokenColumns+` FROM tokens WHERE id = ?`, id), "token "+id)
}

// PruneTokens deletes the tokens revoked or expired before cutoff (but
// serve's). The times are TimeLayout strings, fixed width, compared byte
// by byte.
func (e *Engine) PruneTokens(ctx context.Context, cutoff time.Time) (n int64, err error) {
	defer e.Guard(time.Now(), &err)
	before := agentbridge.FormatTime(cutoff)
	err = e.Write(ctx, func(ctx context.Context, c Conn) error {
		n, err = c.Exec(ctx, `DELETE FROM tokens WHERE created_by <> ? AND ((revoked_at <> '' AND revoked_at`+e.CollateC+` < ?) OR (expires_at <> '' AND expires_at`+e.CollateC+` < ?))`,
			agentbridge.CreatedByServe, before, before)
		if err != nil {
			return fmt.Errorf("prune tokens: %w", err)
		}
		return nil
	})
	return n, err
}

// Tokens lists every token, oldest first.
func (e *Engine) Tokens(ctx context.Context) (_ []agentbridge.Token, err error) {
	defer e.Guard(time.Now(), &err)
	return List(ctx, e.Read, "tokens", ScanToken, `SELECT `+TokenColumns+` FROM tokens ORDER BY seq`)
}

// TokensAfter lists a page of tokens after position after, oldest first.
func (e *Engine) TokensAfter(ctx context.Context, after int64, limit int) (_ []agentbridge.Token, _ []int64, err error) {
	defer e.Guard(time.Now(), &err)
	rows, err := e.Read.Query(ctx, `SELECT seq, `+TokenColumns+` FROM tokens WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	return CollectTokenPage(rows)
}

// CoordinatorTokenIDs lists the coordinator ids the coordinator tokens not
// revoked stand for (each one's participant, else its name).
func (e *Engine) CoordinatorTokenIDs(ctx context.Context) (_ []string, err error) {
	defer e.Guard(time.Now(), &err)
	return List(ctx, e.Read, "coordinator tokens", ScanString,
		`SELECT CASE WHEN participant <> '' THEN participant ELSE name END FROM tokens WHERE scope = 'coordinator' AND revoked_at = ''`)
}
