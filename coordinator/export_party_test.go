package coordinator

import (
	"context"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// TakeNoticeClaim is takeNoticeClaim, which the claimable poller calls
// (TestPartyNoticeClaimLapses).
func TakeNoticeClaim(ctx context.Context, c *Coordinator, cl agentbridge.Claim) {
	c.takeNoticeClaim(ctx, cl)
}
