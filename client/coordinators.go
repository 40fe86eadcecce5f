package client

import (
	"context"
	"net/http"
	"net/url"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// RegisterCoordinator registers reg with the bridge, or renews its
// heartbeat (PUT /coordinators/{id}).
func (c *Client) RegisterCoordinator(ctx context.Context, reg agentbridge.Registration) (agentbridge.RegisterResult, error) {
	var out agentbridge.RegisterResult
	err := c.do(ctx, request{
		op: "register coordinator", method: http.MethodPut,
		path: "/coordinators/" + url.PathEscape(reg.ID), body: reg, wantOut: &out,
	})
	return out, err
}

// DeregisterCoordinator removes id's registration if instance holds it
// (DELETE /coordinators/{id}).
func (c *Client) DeregisterCoordinator(ctx context.Context, id, instance string) error {
	return c.do(ctx, request{
		op: "deregister coordinator", method: http.MethodDelete,
		path: "/coordinators/" + url.PathEscape(id), query: url.Values{"instance": {instance}},
	})
}

// Coordinators lists the bridge's coordinator registrations
// (GET /coordinators).
func (c *Client) Coordinators(ctx context.Context) (agentbridge.CoordinatorsResponse, error) {
	var out agentbridge.CoordinatorsResponse
	err := c.do(ctx, request{op: "list coordinators", method: http.MethodGet, path: "/coordinators", wantOut: &out})
	return out, err
}

// CoordinatorsServedEver lists the registrations with the agent names
// ever registered that say whether participant, whose invited client is
// client, was ever served (GET /coordinators?served_ever=…&client=…).
func (c *Client) CoordinatorsServedEver(ctx context.Context, participant, client string) (agentbridge.CoordinatorsResponse, error) {
	var out agentbridge.CoordinatorsResponse
	q := url.Values{"served_ever": {participant}}
	if client != "" {
		q.Set("client", client)
	}
	err := c.do(ctx, request{op: "list coordinators", method: http.MethodGet, path: "/coordinators", query: q, wantOut: &out})
	return out, err
}
