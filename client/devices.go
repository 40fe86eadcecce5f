package client

import (
	"context"
	"net/http"
	"net/url"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Pair asks the bridge for a one-time link that pairs a device named name
// (contract 7.2; a person token only).
func (c *Client) Pair(ctx context.Context, name string) (agentbridge.PairLink, error) {
	var out agentbridge.PairLink
	err := c.do(ctx, request{op: "pair", method: http.MethodPost, path: "/auth/pair", body: map[string]string{"name": name}, wantOut: &out})
	return out, err
}

// Devices lists the paired devices and the browsers subscribed to push.
func (c *Client) Devices(ctx context.Context) ([]agentbridge.Device, error) {
	var out struct {
		Devices []agentbridge.Device `json:"devices"`
	}
	if err := c.do(ctx, request{op: "list devices", method: http.MethodGet, path: "/devices", wantOut: &out}); err != nil {
		return nil, err
	}
	return out.Devices, nil
}

// RevokeDevice ends the access of the paired device id and removes its
// push subscriptions.
func (c *Client) RevokeDevice(ctx context.Context, id string) (agentbridge.Device, error) {
	var out agentbridge.Device
	err := c.do(ctx, request{op: "revoke device", method: http.MethodDelete, path: "/devices/" + url.PathEscape(id), wantOut: &out})
	return out, err
}
