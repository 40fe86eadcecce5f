package main

import (
	"context"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/mcpserver"
)

// mcpCommand serves the MCP tools over stdin and stdout for an interactive
// agent session (docs/mcp.md). Stdout is the protocol stream, so every log
// line goes to stderr.
func (m *Main) mcpCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	as := fs.String("as", "", "the participant id the tools act as (required)")
	bridgeURL := fs.String("url", agentbridge.DefaultBridgeURL, "bridge URL (else env BRIDGE_URL, else the running up's)")
	token := fs.String("token", "", "bearer token (default: env BRIDGE_TOKEN; prefer the env, flags show in process lists)")
	tokenFile := fs.String("token-file", "", "file holding the bearer token")
	logLevel := fs.String("log-level", m.env(agentbridge.EnvLogLevel, "warn"), "log level on stderr: debug, info, warn or error (env BRIDGE_LOG_LEVEL)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("mcp: unexpected argument %q", pos[0])
		}
		if *as == "" {
			return usagef("--as: required (the participant id the tools act as, such as claude-1)")
		}
		if !agentbridge.ParticipantIDPattern.MatchString(*as) {
			return usagef("--as: %q is not a valid participant id: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit", *as)
		}
		ep := m.bridgeEndpoint(*bridgeURL, fs.Changed("url"))
		*bridgeURL = ep.url
		if u, err := url.Parse(*bridgeURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--url: %q is not an http:// or https:// URL", *bridgeURL)
		}
		tok := strings.TrimSpace(m.Getenv(agentbridge.EnvToken))
		switch {
		case *token != "" && *tokenFile != "":
			return usagef("--token and --token-file: give one, not both")
		case *token != "":
			tok = *token
		case *tokenFile == "" && tok == "" && ep.tokenFile != "":
			*tokenFile = ep.tokenFile
		}
		if *tokenFile != "" {
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
			Version: moduleVersion(),
			Logger:  log,
		})
		if err != nil {
			return err
		}
		log.Info("agent-bridge mcp serving on stdio", "url", *bridgeURL)
		return srv.Run(ctx, &mcp.IOTransport{Reader: newClosableReader(m.Stdin), Writer: nopWriteCloser{m.rawOut()}})
	}
}

// closableReader lets the session end while a read of stdin is blocked.
// Closing a pipe's *os.File does not interrupt a read in progress (the
// close waits for it), so a SIGTERM would leave the session waiting for a
// line that never comes. Reads go through a pump goroutine instead, and
// Close makes Read return at once; the pump ends with stdin's EOF or with
// the process.
type closableReader struct {
	chunks chan chunk
	closed chan struct{}
	once   sync.Once
	rest   []byte
	err    error
}

type chunk struct {
	b   []byte
	err error
}

func newClosableReader(r io.Reader) *closableReader {
	c := &closableReader{chunks: make(chan chunk), closed: make(chan struct{})}
	go func() {
		for {
			buf := make([]byte, 32<<10)
			n, err := r.Read(buf)
			select {
			case c.chunks <- chunk{buf[:n], err}:
			case <-c.closed:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return c
}

// Read must be called from one goroutine at a time.
func (c *closableReader) Read(p []byte) (int, error) {
	for len(c.rest) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		select {
		case ch := <-c.chunks:
			c.rest, c.err = ch.b, ch.err
		case <-c.closed:
			return 0, io.EOF
		}
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

// Close makes a blocked or later Read return io.EOF.
func (c *closableReader) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

// nopWriteCloser leaves stdout open when the session ends: Main does not
// own it.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
