package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// NewToken is a token as POST /auth/tokens answers it: the stored token
// and its secret, which the server shows this once.
type NewToken struct {
	agentbridge.Token
	Secret string `json:"token"`
}

// CreateToken asks the bridge for a token (contract 7.3). A person token
// may create any; a coordinator token only agent tokens bound to a thread
// and a participant it may write as (forbidden_scope, forbidden_sender).
func (c *Client) CreateToken(ctx context.Context, in agentbridge.TokenInput) (NewToken, error) {
	var out NewToken
	err := c.do(ctx, request{op: "create token", method: http.MethodPost, path: "/auth/tokens", body: in, wantOut: &out})
	return out, err
}

// Tokens lists the bridge's tokens, without their secrets (a person token
// only), following GET /auth/tokens's pages to the last.
func (c *Client) Tokens(ctx context.Context) ([]agentbridge.Token, error) {
	var all []agentbridge.Token
	var after int64
	for {
		var page agentbridge.TokensPage
		q := url.Values{}
		if after > 0 {
			q.Set("after", strconv.FormatInt(after, 10))
		}
		if err := c.do(ctx, request{op: "list tokens", method: http.MethodGet, path: "/auth/tokens", query: q, wantOut: &page}); err != nil {
			return nil, err
		}
		all = append(all, page.Tokens...)
		// An older bridge answers every token at once, without next.
		if page.Next <= after {
			return all, nil
		}
		after = page.Next
	}
}

// RevokeToken revokes token id and returns it as revoked; an unknown id is
// token_not_found. Revoking a revoked token changes nothing.
func (c *Client) RevokeToken(ctx context.Context, id string) (agentbridge.Token, error) {
	var out agentbridge.Token
	err := c.do(ctx, request{op: "revoke token", method: http.MethodDelete, path: "/auth/tokens/" + url.PathEscape(id), wantOut: &out})
	return out, err
}

// Whoami returns the credential the client's token stands for.
func (c *Client) Whoami(ctx context.Context) (agentbridge.Whoami, error) {
	var out agentbridge.Whoami
	err := c.do(ctx, request{op: "whoami", method: http.MethodGet, path: "/auth/whoami", wantOut: &out})
	return out, err
}

// LoginLink asks the bridge for a one-time login link (a person token
// only) and returns its path, such as "/ui/login#code=…", to append to
// the bridge's URL, and the whole link at the address a phone reaches
// (the tailnet's, or notify.public_url), which an older bridge leaves "".
func (c *Client) LoginLink(ctx context.Context) (path, link string, err error) {
	var out struct {
		Path string `json:"path"`
		URL  string `json:"url"`
	}
	err = c.do(ctx, request{op: "login link", method: http.MethodPost, path: "/auth/login-links", wantOut: &out})
	return out.Path, out.URL, err
}
