package main

import (
	"context"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/mcpserver"
)

// runMCP serves the MCP tools over stdin and stdout for an interactive
// agent session (docs/mcp.md). Stdout is the protocol stream, so every log
// line goes to stderr.
func (m *Main) runMCP(ctx context.Context, args []string) error {
	fs := m.newFlagSet("mcp")
	as := fs.String("as", "", "the participant id the tools act as (required)")
	bridgeURL := fs.String("url", m.env("BRIDGE_URL", defaultBridgeURL), "bridge URL (env BRIDGE_URL)")
	token := fs.String("token", "", "bearer token (default: env BRIDGE_TOKEN; prefer the env, flags show in process lists)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token")
	logLevel := fs.String("log-level", m.env("BRIDGE_LOG_LEVEL", "warn"), "log level on stderr: debug, info, warn or error (env BRIDGE_LOG_LEVEL)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("mcp: unexpected argument %q", pos[0])
	}
	if *as == "" {
		return usagef("--as: required (the participant id the tools act as, such as claude-1)")
	}
	if !agentbridge.ParticipantIDPattern.MatchString(*as) {
		return usagef("--as: %q is not a valid participant id: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit", *as)
	}
	if u, err := url.Parse(*bridgeURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("--url: %q is not an http:// or https:// URL", *bridgeURL)
	}
	tok := strings.TrimSpace(m.Getenv("BRIDGE_TOKEN"))
	switch {
	case *token != "" && *tokenFile != "":
		return usagef("--token and --token-file: give one, not both")
	case *token != "":
		tok = *token
	case *tokenFile != "":
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return usagef("--token-file: cannot read the token: %v", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	log, err := newLogger(m.Stderr, *logLevel)
	if err != nil {
		return err
	}
	srv, err := mcpserver.New(mcpserver.Options{
		Client:  client.New(*bridgeURL, client.WithToken(tok)),
		As:      *as,
		Version: version,
		Logger:  log,
	})
	if err != nil {
		return err
	}
	log.Info("agent-bridge mcp serving on stdio", "url", *bridgeURL)
	return srv.Run(ctx, &mcp.IOTransport{Reader: readCloser(m.Stdin), Writer: nopWriteCloser{m.Stdout}})
}

// readCloser keeps a closable stdin closable, so that ending the session
// unblocks the read, and wraps anything else.
func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return io.NopCloser(r)
}

// nopWriteCloser leaves stdout open when the session ends: Main does not
// own it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
