package main

import (
	"context"
	"log/slog"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// upCoordinatorName names the coordinator token up makes for its own
// coordinator.
const upCoordinatorName = "up-coordinator"

// upCoordinatorToken makes the token up's own coordinator acts with: a
// coordinator token bound to coordinatorID, made with the person's, so
// that the coordinator is not the person (contract 7.3; what it gives its
// agents is theirs, agenttoken.go). The ones an earlier up left valid (it
// was killed before it could revoke its own) are revoked first. It
// returns the token and the function that revokes it, for when up stops.
// If the bridge will not make one, the coordinator keeps the person's
// token, with a warning.
func (m *Main) upCoordinatorToken(ctx context.Context, bridgeURL, person, coordinatorID string, logger *slog.Logger) (string, func()) {
	cl := client.New(bridgeURL, client.WithToken(person))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if list, err := cl.Tokens(ctx); err == nil {
		for _, t := range list {
			if t.Name == upCoordinatorName && t.Scope == agentbridge.ScopeCoordinator && t.RevokedAt == "" {
				if _, err := cl.RevokeToken(ctx, t.ID); err != nil {
					logger.Warn("could not revoke the coordinator token an earlier up left", "token", t.ID, "err", err)
				}
			}
		}
	}
	t, err := cl.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: upCoordinatorName, Participant: coordinatorID})
	if err != nil {
		logger.Warn("could not make the coordinator a token of its own; it acts with the person's", "err", err)
		return person, func() {}
	}
	return t.Secret, func() {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := cl.RevokeToken(rctx, t.ID); err != nil {
			logger.Warn("could not revoke the coordinator's token", "token", t.ID, "err", err)
		}
	}
}
