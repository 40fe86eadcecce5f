package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// statusGet asks the coordinator's status API and decodes the answer into
// out; an error answer comes back as an *agentbridge.Error.
func (m *Main) statusGet(ctx context.Context, base, path string, q url.Values, out any) error {
	return m.statusDo(ctx, http.MethodGet, base, path, q, out)
}

// statusGetTarget is statusGet of one coordinator the command asks: one
// found through the bridge's registrations gets its fan-out token, any
// other the CLI's own (statusToken).
func (m *Main) statusGetTarget(ctx context.Context, tg statusTarget, path string, q url.Values, out any) error {
	if !tg.fanout {
		return m.statusGet(ctx, tg.url, path, q, out)
	}
	return m.statusRequest(ctx, http.MethodGet, tg.url, tg.token, path, q, out)
}

// statusDo is statusGet with any method. It sends the bridge's token
// (statusToken), as the status API asks for it when there is one.
func (m *Main) statusDo(ctx context.Context, method, base, path string, q url.Values, out any) error {
	return m.statusRequest(ctx, method, base, m.statusToken(base), path, q, out)
}

// statusRequest asks the status API at base with token ("" for none).
func (m *Main) statusRequest(ctx context.Context, method, base, token, path string, q url.Values, out any) error {
	u := strings.TrimRight(base, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return usagef("--coordinator-url: %v", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("ask the coordinator at %s (is it running? see --coordinator-url): %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read the coordinator's answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error *agentbridge.Error `json:"error"`
		}
		if json.Unmarshal(body, &e) == nil && e.Error != nil {
			e.Error.Status = resp.StatusCode
			return e.Error
		}
		return fmt.Errorf("the coordinator answered %s", resp.Status)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decode the coordinator's answer: %w", err)
	}
	return nil
}

// statusToken is the token for the status API at statusURL: BRIDGE_TOKEN,
// else the token file of a running up (whose coordinator shares the
// bridge's token), else the state folder's person token for a status API
// on this machine, else none.
func (m *Main) statusToken(statusURL string) string {
	if tok := strings.TrimSpace(m.Getenv(agentbridge.EnvToken)); tok != "" {
		return tok
	}
	if rt, ok := m.runningUp(); ok && rt.TokenFile != "" {
		if b, err := os.ReadFile(rt.TokenFile); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	return m.localToken(statusURL)
}
