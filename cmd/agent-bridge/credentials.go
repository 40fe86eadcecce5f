package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
	"github.com/agent-bridge/agent-bridge/internal/sqlitex"
)

// tokenFileName is the person token's file in the state folder.
const tokenFileName = "token"

// ownerTokenName names the person token serve and up make on their first
// start, in tokens list.
const ownerTokenName = "owner"

// stateTokenPath is where serve and up keep the person token they make
// for a bridge database: next to a SQLite file, or, for a postgres:// URL
// (which has no folder), in ./data/ of the working folder, where the
// default SQLite file would be (docs/security.md).
func stateTokenPath(db string) string {
	if pg, _ := isPostgres("db", db); pg || db == "" {
		return filepath.Join(filepath.Dir(agentbridge.DefaultDBPath), tokenFileName)
	}
	return filepath.Join(filepath.Dir(db), tokenFileName)
}

// ensurePersonToken returns the person token in the file at path, making
// it on the first start: a new token is written to a new file (mode 0600)
// and its hash stored as the person token named "owner". A file whose
// token the store does not know (a new database) is registered; one whose
// token was revoked or expired is replaced by a new token, with a warning.
func ensurePersonToken(ctx context.Context, ts agentbridge.TokenStore, path string, logger *slog.Logger) (string, error) {
	secret, err := readTokenFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return "", err
	default:
		t, found, err := ts.TokenByHash(ctx, agentbridge.HashToken(secret))
		if err != nil {
			return "", fmt.Errorf("look up the person token: %w", err)
		}
		if found && t.Valid(time.Now()) {
			return secret, nil
		}
		if !found {
			if _, err := ts.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: ownerTokenName, CreatedBy: agentbridge.CreatedByServe}, agentbridge.HashToken(secret)); err != nil {
				return "", fmt.Errorf("register the person token of %s: %w", path, err)
			}
			logger.Info("registered the person token of the state folder with this database", "file", path)
			return secret, nil
		}
		logger.Warn("the person token in the state folder was revoked or expired; making a new one", "file", path, "token", t.ID)
		if err := os.Remove(path); err != nil {
			return "", fmt.Errorf("replace the person token: %w", err)
		}
	}
	secret, err = agentbridge.NewTokenSecret()
	if err != nil {
		return "", err
	}
	if err := sqlitex.MakeFolder(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("create the state folder: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("write the person token: %w", err)
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("write the person token: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write the person token: %w", err)
	}
	if _, err := ts.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopePerson, Name: ownerTokenName, CreatedBy: agentbridge.CreatedByServe}, agentbridge.HashToken(secret)); err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("store the person token: %w", err)
	}
	logger.Info("made the person token", "file", path)
	return secret, nil
}

// readTokenFile reads a token file, surrounding whitespace trimmed; an
// empty file is an error.
func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("the token file %s is empty", path)
	}
	return tok, nil
}

// localTokenPath is the state folder's token file of the bridge database
// this folder uses (BRIDGE_DB, else ./data/bridge.db), for a bridge at
// bridgeURL when that is this machine; "" for a bridge elsewhere, which
// must never be sent this machine's person token.
func (m *Main) localTokenPath(bridgeURL string) string {
	u, err := url.Parse(bridgeURL)
	if err != nil {
		return ""
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host == "" || (ip == nil && !httpguard.IsLoopbackHost(host)) || (ip != nil && !ip.IsLoopback()) {
		return ""
	}
	return stateTokenPath(m.env(agentbridge.EnvDB, agentbridge.DefaultDBPath))
}

// localToken is the token in localTokenPath, "" when there is none.
func (m *Main) localToken(bridgeURL string) string {
	p := m.localTokenPath(bridgeURL)
	if p == "" {
		return ""
	}
	tok, err := readTokenFile(p)
	if err != nil {
		return ""
	}
	return tok
}

// coordinatorToken makes the coordinator token up gives its own
// coordinator (bound to its participant id), and returns revoke, which
// ends it when up stops. A token left by an up that was killed was only
// ever in that process's memory.
func coordinatorToken(ctx context.Context, ts agentbridge.TokenStore, coordinatorID string, logger *slog.Logger) (secret string, revoke func(), err error) {
	secret, err = agentbridge.NewTokenSecret()
	if err != nil {
		return "", nil, err
	}
	t, err := ts.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: "up-coordinator", Participant: coordinatorID, CreatedBy: "up"}, agentbridge.HashToken(secret))
	if err != nil {
		return "", nil, fmt.Errorf("make the coordinator's token: %w", err)
	}
	return secret, func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := ts.RevokeToken(rctx, t.ID); err != nil {
			logger.Warn("revoke the coordinator's token", "token", t.ID, "err", err)
		}
	}, nil
}
