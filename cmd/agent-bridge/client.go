package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"syscall"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/spf13/pflag"
)

// clientFlags are the flags every client subcommand shares.
type clientFlags struct {
	fs        *pflag.FlagSet
	url       string
	tokenFile string
	json      bool
}

func (m *Main) addClientFlags(fs *pflag.FlagSet) *clientFlags {
	cf := &clientFlags{fs: fs}
	fs.StringVar(&cf.url, "url", agentbridge.DefaultBridgeURL, "bridge URL (else env BRIDGE_URL, else the running up's)")
	envFlag(fs, "url", agentbridge.EnvBridgeURL)
	fs.StringVar(&cf.tokenFile, "token-file", "", "file holding the bearer token (else env BRIDGE_TOKEN, else the running up's, else the state folder's token next to BRIDGE_DB or ./data/bridge.db, for a bridge on this machine)")
	envFlag(fs, "token-file", agentbridge.EnvToken)
	fs.BoolVar(&cf.json, "json", false, "print JSON, one value per line, instead of readable text")
	return cf
}

// noArgsClient refuses any argument to command, which takes none, then
// builds its client (newClient).
func (m *Main) noArgsClient(command string, cf *clientFlags, pos []string) (*client.Client, error) {
	if len(pos) > 0 {
		return nil, usagef("%s: unexpected argument %q", command, pos[0])
	}
	return m.newClient(cf)
}

// newClient builds the HTTP client from the shared flags, finding the
// bridge as bridgeEndpoint says; cf.url is set to the URL used, for the
// messages.
func (m *Main) newClient(cf *clientFlags) (*client.Client, error) {
	ep := m.bridgeEndpoint(cf.url, cf.fs.Changed("url"))
	cf.url = ep.url
	u, err := url.Parse(cf.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--url: %q is not an http:// or https:// URL", cf.url)
	}
	token := strings.TrimSpace(m.Getenv(agentbridge.EnvToken))
	tokenFile := cf.tokenFile
	if tokenFile == "" && token == "" {
		tokenFile = ep.tokenFile
	}
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, usagef("--token-file: cannot read the token: %v", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		token = m.localToken(cf.url)
	}
	return client.New(cf.url, client.WithToken(token)), nil
}

// serverError is a refusal by the bridge, printed as the server's own
// sentence.
type serverError struct{ e *agentbridge.Error }

func (s *serverError) Error() string { return s.e.Message }
func (s *serverError) Unwrap() error { return s.e }

// explain turns a client error into what the CLI prints: the server's
// sentence for a refusal, a hint for a bridge that is not running.
func explain(err error, bridgeURL string) error {
	var e *agentbridge.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e):
		return &serverError{e: e}
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w (is the bridge running at %s? start it with \"agent-bridge up\", or point --url or BRIDGE_URL at it)", err, bridgeURL)
	default:
		return err
	}
}

// cursorTypo words a cursor_ahead answer to a seq the user typed (tail
// --after, state --at) as the typo it most likely is, naming the thread's
// last seq; the bridge's own sentence suspects a restored backup, which
// fits a client that remembered a cursor, not a person. Other errors are
// returned as they are.
func cursorTypo(err error, flag string, seq int64, thread string) error {
	var e *agentbridge.Error
	if !errors.As(err, &e) || e.Code != agentbridge.ECodeCursorAhead || e.Head == nil {
		return err
	}
	return usagef("%s: %d is past the end of thread %s, whose last seq is %d", flag, seq, thread, *e.Head)
}

// printJSON prints v as one line of JSON, unescaped (JSON escapes
// control characters itself).
func (m *Main) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = m.rawOut().Write(append(b, '\n'))
	return err
}

// joinText joins the words of a positional argument that was not quoted.
func joinText(words []string) string { return strings.Join(words, " ") }

// stringList is a repeatable string flag (--role a --role b).
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
func (s *stringList) Type() string       { return "string" }
