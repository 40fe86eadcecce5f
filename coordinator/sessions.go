package coordinator

import (
	"context"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
)

// Sessions (contract 5.6): the coordinator keeps, per (thread, participant,
// client), the CLI session id the adapter last reported on its progress
// fd, and hands it back as payload.session on the pair's next run. The
// client is part of the key because a participant re-invited with another
// client cannot resume the old client's session.

// keepSession records the session a run reported, whatever its outcome:
// a run that failed after the CLI created its session still has that
// session to resume. It is best effort; losing it costs a fresh session.
func (c *Coordinator) keepSession(ctx context.Context, inv ledger.Invocation, in prepared, session string) {
	if session == "" {
		return
	}
	client := in.p.Participant.Profile.Client
	if err := c.db.RecordSession(ctx, inv.Thread, inv.Participant, client, session, inv.TriggerSeq, time.Now()); err != nil {
		c.log.Error("record session", "id", inv.ID, "participant", inv.Participant, "err", err)
	}
}

// applyResetSession handles a reset_session control from anyone (a
// participant may ask to start over itself); other events are ignored. It
// is applied before the cursor moves past the control and is idempotent.
func (c *Coordinator) applyResetSession(ctx context.Context, e agentbridge.Event, ctl agentbridge.Control) error {
	if ctl.ResetSession == nil {
		return nil
	}
	if err := c.db.ResetSessions(ctx, e.Thread, ctl.ResetSession.ParticipantID, e.Seq); err != nil {
		return fmt.Errorf("apply reset_session %s: %w", e.ID, err)
	}
	c.log.Info("session reset", "thread", e.Thread, "participant", ctl.ResetSession.ParticipantID, "by", e.From)
	return nil
}
