package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"regexp"

	"github.com/spf13/pflag"

	"github.com/agent-bridge/agent-bridge/bridge"
	"github.com/agent-bridge/agent-bridge/internal/tailnet"
)

// tailnetFlags are --tailnet and its options, which serve and up share.
type tailnetFlags struct {
	on, funnel           *bool
	hostname, controlURL *string
}

// tailnetFlags defines them on fs.
func (*Main) tailnetFlags(fs *pflag.FlagSet) *tailnetFlags {
	return &tailnetFlags{
		on:         fs.Bool("tailnet", false, "also serve HTTPS on your tailnet as its own node, https://NAME.TAILNET.ts.net (env TS_AUTHKEY joins without a login link)"),
		hostname:   fs.String("tailnet-hostname", tailnet.DefaultHostname, "the node's name on the tailnet (with --tailnet)"),
		funnel:     fs.Bool("funnel", false, "also serve the tailnet name on the internet through Tailscale Funnel (with --tailnet; every request still needs a token)"),
		controlURL: fs.String("tailnet-control-url", "", "a self-hosted control server, such as Headscale's URL (with --tailnet; default Tailscale's, or env TS_CONTROL_URL)"),
	}
}

// hostnameLabel is a node name the tailnet takes as it is: one DNS label.
var hostnameLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// tailnetConfig is what startBridge needs to put the bridge on the
// tailnet; On false leaves it off.
type tailnetConfig struct {
	On, Funnel           bool
	Hostname, ControlURL string
	Verbose              bool
	// LoginURL tells the person the link that adds the node to their
	// tailnet (once per link).
	LoginURL func(string)
}

// config checks the flags: the options of --tailnet without it, a name
// that is not one DNS label, or a control URL that is not http(s), are
// usage errors.
func (f *tailnetFlags) config(fs *pflag.FlagSet, logLevel string) (tailnetConfig, error) {
	if !*f.on {
		for _, name := range []string{"tailnet-hostname", "funnel", "tailnet-control-url"} {
			if fs.Changed(name) {
				return tailnetConfig{}, usagef("--%s is an option of --tailnet: add --tailnet", name)
			}
		}
		return tailnetConfig{}, nil
	}
	if !hostnameLabel.MatchString(*f.hostname) {
		return tailnetConfig{}, usagef("--tailnet-hostname: %q is not a node name: lower-case letters, digits and inner hyphens, at most 63", *f.hostname)
	}
	if c := *f.controlURL; c != "" {
		if u, err := url.Parse(c); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return tailnetConfig{}, usagef("--tailnet-control-url: %q is not an http(s) URL", c)
		}
	}
	return tailnetConfig{On: true, Funnel: *f.funnel, Hostname: *f.hostname, ControlURL: *f.controlURL, Verbose: logLevel == "debug"}, nil
}

// tailnetDir is the tailnet node's state folder: "tailnet" in the state
// folder, next to the person token.
func tailnetDir(db string) string {
	return filepath.Join(filepath.Dir(stateTokenPath(db)), "tailnet")
}

// startTailnet joins the tailnet for startBridge; nil, nil when off.
func startTailnet(ctx context.Context, cfg tailnetConfig, db string, logger *slog.Logger) (*tailnet.Node, error) {
	if !cfg.On {
		return nil, nil
	}
	loginURL := cfg.LoginURL
	if loginURL == nil {
		loginURL = func(u string) {
			logger.Info("to put the bridge on your tailnet, open this link; the bridge waits for it", "url", u)
		}
	}
	return tailnet.Start(ctx, tailnet.Options{
		Dir:        tailnetDir(db),
		Hostname:   cfg.Hostname,
		ControlURL: cfg.ControlURL,
		Funnel:     cfg.Funnel,
		Logger:     logger,
		Verbose:    cfg.Verbose,
		LoginURL:   loginURL,
	})
}

// pairPhone makes the pairing link up --tailnet shows as a QR code, for a
// device named "phone"; "" without the tailnet, or when the link cannot be
// made (it is a convenience: `agent-bridge pair` makes another).
func (m *Main) pairPhone(ctx context.Context, b *runningBridge, logger *slog.Logger) string {
	if b.Tailnet == nil {
		return ""
	}
	link, err := b.Server.NewPairLink(ctx, "phone")
	if err != nil {
		logger.Warn("no pairing link", "err", err)
		return ""
	}
	return link.URL
}

// printPairing prints, after up's summary, the tailnet address and the
// pairing link as a QR code for the phone's camera.
func (m *Main) printPairing(b *runningBridge, link string) {
	if b.Tailnet == nil {
		return
	}
	w := &bytes.Buffer{}
	fmt.Fprintf(w, "On your tailnet at %s\n", b.Tailnet.URL())
	if link != "" {
		fmt.Fprintf(w, "Scan this with your phone's camera within %s to pair it (once; the phone must be on your tailnet):\n", bridge.PairTTL)
		printQR(w, link)
		fmt.Fprintf(w, "%s\n", link)
	}
	_, _ = m.Stdout.Write(w.Bytes())
}
