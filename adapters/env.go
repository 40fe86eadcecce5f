package adapters

import (
	"os"
	"path/filepath"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
)

// EnvToken is the variable that carries an agent's bridge credential: the
// coordinator sets it to the run's own agent token (contract 7.3), which
// the shipped adapters and "agent-bridge mcp" inside the agent use.
const EnvToken = agentbridge.EnvToken

// Inherited is the part of environ (KEY=VALUE entries, as os.Environ
// returns them) an adapter or ACP agent inherits: everything but the
// bridge credentials of the process that starts it. BRIDGE_TOKEN is left
// out, and so is every variable, whatever its name, whose value is one of
// secrets (the coordinator's own token) or one of the person tokens that
// environ leads to (PersonTokens), since a person may have exported
// either under another name (MY_BRIDGE=…, AGENT_BRIDGE_TOKEN=…); an agent
// never holds a person's or the coordinator's token. The agent's own
// token is added after it.
func Inherited(environ []string, secrets ...string) []string {
	secrets = append(PersonTokens(environ), secrets...)
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

// NoToken is the BRIDGE_TOKEN of an agent the coordinator has no token
// for: it keeps the agent-bridge CLI inside from falling back to the
// person's token file. It is no secret, so no variable is left out for
// holding it.
const NoToken = "none"

// PersonTokens are the tokens of the person that a process with the
// environment environ can find, the way the agent-bridge CLI finds them
// (docs/security.md): BRIDGE_TOKEN's value, the token file of a running
// "agent-bridge up" (its runtime file), and the token file in the state
// folder of the bridge database (BRIDGE_DB, else ./data/bridge.db,
// relative to the working folder). A file that cannot be read is skipped:
// then there is nothing of it to leak.
func PersonTokens(environ []string) []string {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	var out []string
	if v := strings.TrimSpace(env[EnvToken]); v != "" && v != NoToken {
		out = append(out, v)
	}
	files := []string{stateTokenFile(env[agentbridge.EnvDB])}
	if rt, ok, _ := client.ReadRuntime(client.RuntimePath(func(k string) string { return env[k] })); ok && rt.TokenFile != "" {
		files = append(files, rt.TokenFile)
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		if b, err := os.ReadFile(f); err == nil {
			if v := strings.TrimSpace(string(b)); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// stateTokenFile is the person token's file serve and up keep for the
// bridge database db ("" for the default): "token" next to a SQLite file,
// ./data/token for a postgres:// URL, which has no folder.
func stateTokenFile(db string) string {
	if db == "" || strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		db = agentbridge.DefaultDBPath
	}
	return filepath.Join(filepath.Dir(db), "token")
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
