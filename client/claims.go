package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Claims (contract 7.1, docs/api.md "Claims"): a coordinator claims a run
// before it starts it and fences its writes with the claim's number.

// claimKey is the context key of WithClaim.
type claimKey struct{}

// WithClaim returns a context whose bridge writes (Append, PutReceipt,
// presence) carry the Bridge-Claim header for claim id at fence, so that
// the bridge refuses them (409 fenced) once the claim has moved on.
func WithClaim(ctx context.Context, id, fence int64) context.Context {
	return context.WithValue(ctx, claimKey{}, agentbridge.FormatClaimHeader(id, fence))
}

// claimHeader is the Bridge-Claim value ctx carries ("" for none).
func claimHeader(ctx context.Context) string {
	v, _ := ctx.Value(claimKey{}).(string)
	return v
}

// Claim files req (POST /claims): the answer says whether this
// coordinator holds the claim now, and at which fence.
func (c *Client) Claim(ctx context.Context, req agentbridge.ClaimRequest) (agentbridge.ClaimResult, error) {
	var out agentbridge.ClaimResult
	err := c.do(ctx, request{op: "claim", method: http.MethodPost, path: "/claims", body: req, wantOut: &out})
	return out, err
}

// FinishClaim marks claim id done (POST /claims/{id}/done); a stale fence
// is an *agentbridge.Error with code fenced.
func (c *Client) FinishClaim(ctx context.Context, id, fence int64, coordinator, instance string) (agentbridge.Claim, error) {
	var out agentbridge.Claim
	err := c.do(ctx, request{
		op: "finish claim", method: http.MethodPost, path: "/claims/" + strconv.FormatInt(id, 10) + "/done",
		body: map[string]any{"coordinator": coordinator, "instance": instance, "fence": fence}, wantOut: &out,
	})
	return out, err
}

// EndNotATrigger ends claim id, which coordinator holds at fence, as no
// trigger (POST /claims/{id}/done with outcome not_a_trigger): its own
// trigger rules disagree with the claim, so nobody runs it (contract 8.3).
func (c *Client) EndNotATrigger(ctx context.Context, id, fence int64, coordinator, instance, why string) (agentbridge.Claim, error) {
	var out agentbridge.Claim
	err := c.do(ctx, request{
		op: "end claim", method: http.MethodPost, path: "/claims/" + strconv.FormatInt(id, 10) + "/done",
		body: map[string]any{"coordinator": coordinator, "instance": instance, "fence": fence,
			"outcome": agentbridge.ClaimNotATrigger, "reason": agentbridge.Clip(why, agentbridge.MaxClaimText/4)}, wantOut: &out,
	})
	return out, err
}

// Claimable lists the claims coordinator may take now
// (GET /claims?claimable=), oldest first.
func (c *Client) Claimable(ctx context.Context, coordinator string) ([]agentbridge.Claim, error) {
	var out agentbridge.ClaimsResponse
	err := c.do(ctx, request{op: "list claimable", method: http.MethodGet, path: "/claims", query: url.Values{"claimable": {coordinator}}, wantOut: &out})
	return out.Claims, err
}

// Claims lists a thread's claims (GET /claims?thread=), oldest first.
func (c *Client) Claims(ctx context.Context, thread string) ([]agentbridge.Claim, error) {
	var out agentbridge.ClaimsResponse
	err := c.do(ctx, request{op: "list claims", method: http.MethodGet, path: "/claims", query: url.Values{"thread": {thread}}, wantOut: &out})
	return out.Claims, err
}

// WaitClaim puts running claim req.ID, which this coordinator holds, back
// to waiting until req.RetryAt (POST /claims/{id}/wait, contract 8.5).
func (c *Client) WaitClaim(ctx context.Context, req agentbridge.ClaimWaitRequest) (agentbridge.Claim, error) {
	var out agentbridge.Claim
	err := c.do(ctx, request{
		op: "wait claim", method: http.MethodPost, path: "/claims/" + strconv.FormatInt(req.ID, 10) + "/wait",
		body: req, wantOut: &out,
	})
	return out, err
}
