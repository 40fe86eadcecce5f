package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/bridge/ui"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
	"github.com/agent-bridge/agent-bridge/internal/tailnet"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// shutdownGrace bounds how long a stopping server waits for in-flight
// requests before it closes their connections.
const shutdownGrace = 10 * time.Second

// bridgeConfig is everything startBridge needs; serve fills it from flags
// and up from its defaults.
type bridgeConfig struct {
	Addr         string
	DB           string
	Humans       agentbridge.Humans
	Token        string
	AllowedHosts []string
	CORSOrigins  []string
	MaxBody      int64
	// MaxStreams caps open streams (0 = bridge's default, 1,024).
	MaxStreams int
	Version    string
	// CoordinatorURL is where the UI links to the runs dashboard (see
	// ui.Options).
	CoordinatorURL func() string
	// Open keeps the token-less v0 behaviour (serve --open): no person
	// token is made and a request without a token acts as the person.
	Open bool
	// TokenPath is the person token's file (stateTokenPath of DB when "").
	TokenPath string
	// File is the --bridge-config file's content.
	File bridgeFileConfig
	// TLSCert and TLSKey serve HTTPS (see bridge.Options).
	TLSCert, TLSKey string
	// Tailnet puts the bridge on the person's tailnet too.
	Tailnet tailnetConfig
}

// runningBridge is a started bridge: its store and its listening server.
type runningBridge struct {
	Server *bridge.Server
	Store  closingStore
	// PersonToken is the state folder's person token, and TokenPath its
	// file ("" for an open bridge).
	PersonToken, TokenPath string
	// Tailnet is the bridge's node on the tailnet (nil without --tailnet).
	Tailnet *tailnet.Node
}

// URL returns the server's base URL.
func (b *runningBridge) URL() string { return b.Server.URL() }

// PublicURL is where a person reaches the bridge from elsewhere, the start
// of the links up prints: the tailnet's address, else the server's own.
func (b *runningBridge) PublicURL() string {
	if b.Tailnet != nil {
		return b.Tailnet.URL()
	}
	return b.URL()
}

// Close stops the server (ending streams, finishing in-flight requests
// until ctx is done), then leaves the tailnet and closes the store: the
// reverse of the start order.
func (b *runningBridge) Close(ctx context.Context) error {
	err := b.Server.Close(ctx)
	if b.Tailnet != nil {
		err = errors.Join(err, b.Tailnet.Close())
	}
	return errors.Join(err, b.Store.Close())
}

// closeOnError undoes what startBridge opened before it failed.
func (b *runningBridge) closeOnError() {
	if b.Tailnet != nil {
		_ = b.Tailnet.Close()
	}
	_ = b.Store.Close()
}

// startBridge opens the store and starts the server with the web UI. It is
// the one wiring shared by serve, up and the end-to-end tests. Unless
// cfg.Open, every request needs a token, and the state folder's person
// token is made on the first start (ensurePersonToken). With cfg.Tailnet
// it joins the tailnet first (waiting for the person's login when one is
// needed), allows the tailnet name in the gate, makes it the start of
// pairing and login links (unless notify.public_url names another), and
// serves the tailnet listener beside the loopback one. A non-loopback
// address with Open, --open with --tailnet, or a malformed host or origin
// list, is a *usageError.
func startBridge(ctx context.Context, cfg bridgeConfig, logger *slog.Logger) (*runningBridge, error) {
	if cfg.Open && !httpguard.IsLoopbackAddr(cfg.Addr) {
		return nil, usagef("--open: %s is reachable from other machines, and --open lets anyone who reaches it act as anyone; listen on 127.0.0.1", cfg.Addr)
	}
	if cfg.Open && cfg.Tailnet.On {
		return nil, usagef("--open with --tailnet would let anyone on the tailnet act as anyone: drop --open")
	}
	store, err := openEventStore(ctx, cfg.DB, cfg.Humans, logger.With("component", "store"))
	if err != nil {
		return nil, err
	}
	rb := &runningBridge{Store: store}
	if !cfg.Open {
		rb.TokenPath = cfg.TokenPath
		if rb.TokenPath == "" {
			rb.TokenPath = stateTokenPath(cfg.DB)
		}
		if rb.PersonToken, err = ensurePersonToken(ctx, store, rb.TokenPath, logger); err != nil {
			_ = store.Close()
			return nil, err
		}
	} else {
		logger.Warn("--open: requests without a token act as the person; any local process may act as anyone, answer permission requests and pause threads")
	}
	if cfg.File.Notify.AllowPrivateEndpoints {
		logger.Warn("notify.allow_private_endpoints: Web Push may reach loopback and private addresses, so whoever holds a person token may make this bridge send requests inside its network; it is meant for tests")
	}
	if rb.Tailnet, err = startTailnet(ctx, cfg.Tailnet, cfg.DB, logger); err != nil {
		_ = store.Close()
		return nil, err
	}
	notifyOpts := cfg.File.notifyOptions()
	if rb.Tailnet != nil {
		cfg.AllowedHosts = append(cfg.AllowedHosts, rb.Tailnet.Name())
		if notifyOpts.BaseURL == nil {
			notifyOpts.BaseURL = rb.Tailnet.URL
		}
	}
	srv, err := bridge.NewServer(store, bridge.Options{
		Addr:               cfg.Addr,
		RequireCredential:  !cfg.Open,
		Token:              cfg.Token,
		Humans:             cfg.Humans,
		AllowedHosts:       cfg.AllowedHosts,
		CORSOrigins:        cfg.CORSOrigins,
		MaxBody:            cfg.MaxBody,
		MaxStreams:         cfg.MaxStreams,
		Logger:             logger,
		Version:            cfg.Version,
		UI:                 ui.NewHandler(ui.Options{CoordinatorURL: cfg.CoordinatorURL}),
		Notify:             notifyOpts,
		AttachmentMaxBytes: cfg.File.Attachments.MaxBytes,
		AttachmentDir:      attachmentDir(cfg.DB),
		TLSCert:            cfg.TLSCert,
		TLSKey:             cfg.TLSKey,
		CatchUp:            cfg.File.catchUp(),
	})
	if err != nil {
		rb.closeOnError()
		if errors.Is(err, bridge.ErrInsecureAddr) {
			return nil, usagef("--addr: %v", err)
		}
		return nil, usagef("%v", err)
	}
	if err := srv.Open(); err != nil {
		rb.closeOnError()
		return nil, err
	}
	rb.Server = srv
	if rb.Tailnet != nil {
		if err := srv.Serve(rb.Tailnet.Listener(), "the tailnet"); err != nil {
			_ = srv.Close(context.WithoutCancel(ctx))
			rb.closeOnError()
			return nil, err
		}
	}
	return rb, nil
}

// maxStreamsFlag defines --max-streams for serve and up.
func (*Main) maxStreamsFlag(fs *pflag.FlagSet) *string {
	return fs.String("max-streams", strconv.Itoa(bridge.DefaultMaxStreams),
		"most streams (SSE and waiting long-polls) open at once; the one over gets 503 too_many_streams")
}

// bridgeConfigFlag defines --bridge-config for serve and up.
func (*Main) bridgeConfigFlag(fs *pflag.FlagSet) *string {
	return fs.String("bridge-config", "", "JSON file of the bridge's own settings: \"notify\" (ntfy topic, public URL) and \"attachments\" (max_bytes); docs/operations.md")
}

// tlsFlags define --tls-cert and --tls-key for serve and up.
func (*Main) tlsFlags(fs *pflag.FlagSet) (cert, key *string) {
	return fs.String("tls-cert", "", "PEM certificate (chain) file: serve HTTPS, with HSTS and Secure cookies (with --tls-key)"),
		fs.String("tls-key", "", "PEM private key file of --tls-cert")
}

// parseMaxStreams reads the value of --max-streams.
func parseMaxStreams(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 {
		return 0, usagef("--max-streams: %q is not a positive whole number", s)
	}
	return n, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// readToken returns the token from --token-file (surrounding whitespace
// trimmed) or else BRIDGE_TOKEN; an empty token file is a usage error,
// since its owner clearly meant to set one.
func (m *Main) readToken(path string) (string, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", usagef("--token-file: %v", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", usagef("--token-file: %s is empty", path)
		}
		return tok, nil
	}
	return strings.TrimSpace(m.Getenv(agentbridge.EnvToken)), nil
}

func (m *Main) serveCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	addr := fs.String("addr", m.env(agentbridge.EnvAddr, bridge.DefaultAddr), "listen address (env BRIDGE_ADDR); a non-loopback address needs a token")
	db := fs.String("db", m.env(agentbridge.EnvDB, agentbridge.DefaultDBPath), "SQLite database file, created with its folder, or a postgres:// URL (env BRIDGE_DB)")
	humans := fs.String("humans", "user", "comma-separated participant ids whose controls count")
	tokenFile := fs.String("token-file", "", "file holding the bearer token (else env BRIDGE_TOKEN)")
	allowedHosts := fs.String("allowed-hosts", "", "comma-separated extra Host names (no port) besides loopback")
	corsOrigins := fs.String("cors-origin", "", "comma-separated extra allowed origins, scheme://host[:port]")
	maxBody := fs.String("max-body", strconv.Itoa(bridge.DefaultMaxBody), "maximum request body, in bytes")
	maxStreams := m.maxStreamsFlag(fs)
	logLevel := fs.String("log-level", m.env(agentbridge.EnvLogLevel, "info"), "debug, info, warn or error (env BRIDGE_LOG_LEVEL)")
	open := fs.Bool("open", false, "take requests without a token, as v0 did (loopback only): any local process may then act as anyone")
	bridgeCfgPath := m.bridgeConfigFlag(fs)
	tlsCert, tlsKey := m.tlsFlags(fs)
	tf := m.tailnetFlags(fs)
	coordURL := fs.String("coordinator-url", m.env(agentbridge.EnvCoordinatorURL, agentbridge.DefaultStatusURL), "the coordinator's status address, which the web UI links to as the runs dashboard (env BRIDGE_COORDINATOR_URL)")
	return func(ctx context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("serve takes no arguments, got %q", pos[0])
		}
		if u, err := url.Parse(*coordURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--coordinator-url: %q is not an http(s) URL", *coordURL)
		}
		logger, err := newLogger(m.Stderr, *logLevel)
		if err != nil {
			return err
		}
		mb, err := strconv.ParseInt(*maxBody, 10, 64)
		if err != nil || mb <= 0 {
			return usagef("--max-body: %q is not a positive number of bytes", *maxBody)
		}
		ms, err := parseMaxStreams(*maxStreams)
		if err != nil {
			return err
		}
		hs, err := parseHumans(*humans)
		if err != nil {
			return err
		}
		token, err := m.readToken(*tokenFile)
		if err != nil {
			return err
		}
		file, err := readBridgeConfig(*bridgeCfgPath)
		if err != nil {
			return err
		}
		tc, err := tf.config(fs, *logLevel)
		if err != nil {
			return err
		}
		b, err := startBridge(ctx, bridgeConfig{
			Addr:           *addr,
			DB:             *db,
			Humans:         hs,
			Token:          token,
			AllowedHosts:   splitList(*allowedHosts),
			CORSOrigins:    splitList(*corsOrigins),
			MaxBody:        mb,
			MaxStreams:     ms,
			Version:        moduleVersion(),
			CoordinatorURL: func() string { return *coordURL },
			Open:           *open,
			File:           file,
			TLSCert:        *tlsCert,
			TLSKey:         *tlsKey,
			Tailnet:        tc,
		}, logger)
		if err != nil {
			return err
		}
		logger.Info("agent-bridge serving", "url", b.URL(), "db", maskURL(*db), "ui", b.PublicURL()+"/ui", "token_file", b.TokenPath, "open", *open)
		if b.Tailnet != nil {
			logger.Info("on the tailnet", "url", b.Tailnet.URL(), "funnel", tc.Funnel, "login_link", "agent-bridge login-link", "pair", "agent-bridge pair")
		}
		<-ctx.Done()
		logger.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		defer cancel()
		// A second SIGINT/SIGTERM skips the grace period.
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(again)
		go func() {
			select {
			case <-again:
				logger.Warn("second signal: closing connections now")
				cancel()
			case <-sctx.Done():
			}
		}()
		if err := b.Close(sctx); err != nil {
			return fmt.Errorf("shut down: %w", err)
		}
		return nil
	}
}
