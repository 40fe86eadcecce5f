// Package tailnet puts the bridge on the person's tailnet as a node of its
// own (contract 8.4) through tailscale.com/tsnet: it joins with an auth key
// or a login link the person opens once, gets the tailnet's certificate for
// its name, and hands the bridge a TLS listener on port 443 at
// https://NAME.TAILNET.ts.net (with Funnel, also reachable from the
// internet). Nothing of the bridge's reaches Tailscale's log service.
package tailnet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"tailscale.com/envknob"
	"tailscale.com/ipn"
	"tailscale.com/logtail"
	"tailscale.com/tsnet"
)

// DefaultHostname is the node's name on the tailnet when none is given.
const DefaultHostname = "agent-bridge"

// Options are what Start needs.
type Options struct {
	// Dir is the node's state folder (its keys, the certificate), made
	// when missing, mode 0700.
	Dir string
	// Hostname is the node's name (DefaultHostname when "").
	Hostname string
	// ControlURL is the control server: "" for Tailscale's (or the
	// TS_CONTROL_URL environment variable), or a self-hosted one
	// (Headscale).
	ControlURL string
	// AuthKey joins without a person; "" uses TS_AUTHKEY, and without it
	// the node asks for a login (LoginURL).
	AuthKey string
	// Funnel also serves the node's name on the internet (Tailscale
	// Funnel); the tailnet must allow the node to.
	Funnel bool
	// Logger gets the node's own messages at debug level, and, with
	// Verbose, Tailscale's backend's too.
	Logger  *slog.Logger
	Verbose bool
	// LoginURL is called once with the link that adds this node to a
	// tailnet, when it must be added by a person (no auth key, or an
	// expired node key); again only if control gives a new link.
	LoginURL func(string)
}

// Node is a started tailnet node serving HTTPS. Close it when done.
type Node struct {
	srv    *tsnet.Server
	domain string
	ln     net.Listener
}

// ErrNoHTTPS is returned by Start when the tailnet gives its nodes no
// certificates (HTTPS or MagicDNS off in its DNS settings).
var ErrNoHTTPS = errors.New("the tailnet gives no HTTPS certificates: turn on MagicDNS and HTTPS Certificates in its DNS settings")

// Start joins the tailnet (waiting, until ctx ends, for a person to open
// the login link when one is needed), fetches the node's certificate, and
// opens the HTTPS listener. It disables Tailscale's log uploads for the
// whole process first: the bridge's logs stay on this machine.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if opts.Hostname == "" {
		opts.Hostname = DefaultHostname
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("tailnet state folder: %w", err)
	}
	logtail.Disable()
	envknob.SetNoLogsNoSupport()
	log := opts.Logger.With("component", "tailnet")
	srv := &tsnet.Server{
		Dir:        opts.Dir,
		Hostname:   opts.Hostname,
		ControlURL: opts.ControlURL,
		AuthKey:    opts.AuthKey,
		UserLogf:   func(format string, args ...any) { log.Debug(fmt.Sprintf(format, args...)) },
	}
	if opts.Verbose {
		srv.Logf = srv.UserLogf
	}
	n := &Node{srv: srv}
	if err := n.start(ctx, opts, log); err != nil {
		_ = srv.Close()
		return nil, err
	}
	return n, nil
}

// start does Start's work on n, whose server the caller closes on error.
func (n *Node) start(ctx context.Context, opts Options, log *slog.Logger) error {
	if err := n.srv.Start(); err != nil {
		return fmt.Errorf("start the tailnet node: %w", err)
	}
	if err := n.waitRunning(ctx, opts.LoginURL); err != nil {
		return err
	}
	st, err := n.srv.Up(ctx)
	if err != nil {
		return fmt.Errorf("join the tailnet: %w", err)
	}
	if len(st.CertDomains) == 0 || !st.CurrentTailnet.MagicDNSEnabled {
		return ErrNoHTTPS
	}
	n.domain = strings.TrimSuffix(st.CertDomains[0], ".")
	lc, err := n.srv.LocalClient()
	if err != nil {
		return fmt.Errorf("the tailnet node's local API: %w", err)
	}
	// The certificate is fetched now, not at the first request: a tailnet
	// that cannot give one fails the start, and the phone's first page
	// does not wait for the certificate authority.
	log.Info("getting the tailnet's certificate", "name", n.domain)
	began := time.Now()
	if _, _, err := lc.CertPair(ctx, n.domain); err != nil {
		return fmt.Errorf("the certificate for %s: %w", n.domain, err)
	}
	log.Info("tailnet certificate ready", "name", n.domain, "took", time.Since(began).Round(time.Millisecond))
	if opts.Funnel {
		// A Funnel listener takes the tailnet's connections too.
		n.ln, err = n.srv.ListenFunnel("tcp", ":443")
		if err != nil {
			return fmt.Errorf("--funnel: %w", err)
		}
		return nil
	}
	if n.ln, err = n.srv.ListenTLS("tcp", ":443"); err != nil {
		return fmt.Errorf("listen on the tailnet: %w", err)
	}
	return nil
}

// waitRunning waits until the node runs on the tailnet, handing loginURL
// each new link a person must open to add it.
func (n *Node) waitRunning(ctx context.Context, loginURL func(string)) error {
	lc, err := n.srv.LocalClient()
	if err != nil {
		return fmt.Errorf("the tailnet node's local API: %w", err)
	}
	w, err := lc.WatchIPNBus(ctx, ipn.NotifyInitialState)
	if err != nil {
		return fmt.Errorf("watch the tailnet node: %w", err)
	}
	defer w.Close()
	shown := ""
	for {
		note, err := w.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("watch the tailnet node: %w", err)
		}
		if note.ErrMessage != nil {
			return fmt.Errorf("the tailnet node: %s", *note.ErrMessage)
		}
		if u := note.BrowseToURL; u != nil && *u != "" && *u != shown && loginURL != nil {
			shown = *u
			loginURL(shown)
		}
		if note.State != nil && *note.State == ipn.Running {
			return nil
		}
	}
}

// Name is the node's DNS name on the tailnet, such as
// agent-bridge.tail1234.ts.net.
func (n *Node) Name() string { return n.domain }

// URL is the node's HTTPS address, https://Name().
func (n *Node) URL() string { return "https://" + n.domain }

// Listener is the node's TLS listener on port 443: serve it.
func (n *Node) Listener() net.Listener { return n.ln }

// Close leaves the tailnet's connections and stops the node (its state
// stays in the folder, so the next start joins as the same node).
func (n *Node) Close() error {
	if err := n.srv.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("close the tailnet node: %w", err)
	}
	return nil
}
