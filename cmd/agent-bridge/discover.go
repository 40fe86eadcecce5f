package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// endpoint is where a command sends its requests, and the token file
// that goes with it when it came from up's runtime file.
type endpoint struct {
	url, tokenFile string
}

// runningUp returns the runtime file of a running up, if there is one
// (client.ReadRuntime); a file that cannot be used is as good as none.
func (m *Main) runningUp() (client.Runtime, bool) {
	rt, ok, err := client.ReadRuntime(client.RuntimePath(m.Getenv))
	if err != nil {
		return client.Runtime{}, false
	}
	return rt, ok
}

// bridgeEndpoint resolves the bridge's URL (contract 6.4): the --url flag
// when given, else BRIDGE_URL, else a running up's, else the default.
func (m *Main) bridgeEndpoint(flagValue string, given bool) endpoint {
	if given {
		return endpoint{url: flagValue}
	}
	if v := m.Getenv(agentbridge.EnvBridgeURL); v != "" {
		return endpoint{url: v}
	}
	if rt, ok := m.runningUp(); ok && rt.BridgeURL != "" {
		return endpoint{url: rt.BridgeURL, tokenFile: rt.TokenFile}
	}
	return endpoint{url: agentbridge.DefaultBridgeURL}
}

// statusURL resolves the coordinator's status API the same way:
// --coordinator-url, else BRIDGE_COORDINATOR_URL, else a running up's,
// else the default.
func (m *Main) statusURL(flagValue string, given bool) string {
	if given {
		return flagValue
	}
	if v := m.Getenv(agentbridge.EnvCoordinatorURL); v != "" {
		return v
	}
	if rt, ok := m.runningUp(); ok && rt.StatusURL != "" {
		return rt.StatusURL
	}
	return agentbridge.DefaultStatusURL
}

// coordinatorURLFlag defines --coordinator-url for the commands that ask
// the coordinator's status API; the returned function resolves it
// (statusURL) once the flags are parsed.
func (m *Main) coordinatorURLFlag(fs *pflag.FlagSet) func() string {
	v := fs.String("coordinator-url", agentbridge.DefaultStatusURL, "the coordinator's status API (else env BRIDGE_COORDINATOR_URL, else the running up's)")
	envFlag(fs, "coordinator-url", agentbridge.EnvCoordinatorURL)
	return func() string { return m.statusURL(*v, fs.Changed("coordinator-url")) }
}

// statusTarget is one coordinator's status API, with the name a command
// prints it under ("" when it is the only one asked). fanout marks one
// found in the bridge's registrations, which any coordinator token may
// write: it is sent token (a short-lived read token, or none), never the
// person's.
type statusTarget struct {
	name, url string
	fanout    bool
	token     string
}

// fanoutTokenTTL is the life of the read token the fan-out sends to the
// registered status URLs: one command's worth.
const fanoutTokenTTL = 60

// registryWait bounds asking the bridge which coordinators are live.
const registryWait = 2 * time.Second

// coordinatorURLsFlag defines --coordinator-url for a command that can ask
// every live coordinator (contract 7.1): the returned function gives the
// flag's or BRIDGE_COORDINATOR_URL's one when set, else the status URLs
// of the live coordinators the bridge lists (GET /coordinators), else
// what statusURL resolves (a running up's, or the default).
func (m *Main) coordinatorURLsFlag(fs *pflag.FlagSet) func(context.Context) []statusTarget {
	v := fs.String("coordinator-url", agentbridge.DefaultStatusURL, "the coordinator's status API (else env BRIDGE_COORDINATOR_URL, else every live coordinator the bridge lists, else the running up's)")
	envFlag(fs, "coordinator-url", agentbridge.EnvCoordinatorURL)
	return func(ctx context.Context) []statusTarget {
		given := fs.Changed("coordinator-url")
		if given || m.Getenv(agentbridge.EnvCoordinatorURL) != "" {
			return []statusTarget{{url: m.statusURL(*v, given)}}
		}
		if list := m.liveStatusURLs(ctx); len(list) > 0 {
			return list
		}
		return []statusTarget{{url: m.statusURL(*v, false)}}
	}
}

// liveStatusURLs asks the bridge (found as bridgeEndpoint finds it) for
// its live coordinators that have a status API; none when it does not
// answer.
func (m *Main) liveStatusURLs(ctx context.Context) []statusTarget {
	cl, err := m.discoveredClient()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, registryWait)
	defer cancel()
	list, err := cl.Coordinators(ctx)
	if err != nil {
		return nil
	}
	own := ""
	if rt, ok := m.runningUp(); ok {
		own = rt.StatusURL
	}
	var out []statusTarget
	readToken, minted := "", false
	for _, c := range list.Coordinators {
		if !c.Live || c.StatusURL == "" {
			continue
		}
		tg := statusTarget{name: c.ID + " @ " + c.Host, url: c.StatusURL, fanout: c.StatusURL != own}
		if tg.fanout {
			if !minted {
				readToken, minted = m.fanoutToken(ctx, cl), true
			}
			tg.token = readToken
		}
		out = append(out, tg)
	}
	return out
}

// fanoutToken makes the read token the fan-out sends (GETs are all a
// status API needs of it), living fanoutTokenTTL seconds; "" when the
// CLI's own token may not make one (it then sends none: a status API
// that needs a token refuses, which the command reports per coordinator).
func (m *Main) fanoutToken(ctx context.Context, cl *client.Client) string {
	t, err := cl.CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeRead, Name: "cli-fanout", TTLSeconds: fanoutTokenTTL})
	if err != nil {
		fmt.Fprintf(m.Stderr, "Note: cannot make a read token for the coordinators' status APIs (%v); asking them without a token.\n", err)
		return ""
	}
	return t.Secret
}
