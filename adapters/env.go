package adapters

import (
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// EnvToken is the variable that carries an agent's bridge credential: the
// coordinator sets it to the run's own agent token (contract 7.3), which
// the shipped adapters and "agent-bridge mcp" inside the agent use.
const EnvToken = agentbridge.EnvToken

// Inherited is the part of environ (KEY=VALUE entries, as os.Environ
// returns them) an adapter or ACP agent inherits: everything but the
// bridge credentials of the process that starts it. BRIDGE_TOKEN is left
// out, and so is every variable, whatever its name, whose value is one of
// secrets (the coordinator's own token, which a person may have exported
// under another name), so that an agent never holds a person's or the
// coordinator's token. The agent's own token is added after it.
func Inherited(environ []string, secrets ...string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if k == EnvToken || isSecret(v, secrets) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// isSecret reports whether v, trimmed as a token file's content is, is one
// of secrets.
func isSecret(v string, secrets []string) bool {
	v = strings.TrimSpace(v)
	if v == "" {
		return false
	}
	for _, s := range secrets {
		if s != "" && v == s {
			return true
		}
	}
	return false
}
