package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/agent-bridge/agent-bridge/bridge/notify"
)

// bridgeFileConfig is the file --bridge-config names: the bridge's own
// settings beyond its flags. Today that is "notify": the bridge sees every
// event and holds the push subscriptions, so it is where notifications are
// configured (docs/operations.md "On your phone").
type bridgeFileConfig struct {
	Notify struct {
		// PublicURL is how a phone reaches this bridge (behind tailscale
		// serve or a TLS proxy), the start of ntfy's click links.
		PublicURL string `json:"public_url"`
		// Subject is the VAPID subject, a mailto: or https: URL a push
		// service may use to reach the operator.
		Subject string      `json:"subject"`
		Ntfy    notify.Ntfy `json:"ntfy"`
	} `json:"notify"`
}

// readBridgeConfig reads and checks the --bridge-config file ("" = none).
// Unknown keys are refused, so a misspelt one is not silently ignored.
func readBridgeConfig(path string) (bridgeFileConfig, error) {
	var cfg bridgeFileConfig
	if path == "" {
		return cfg, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, usagef("--bridge-config: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, usagef("--bridge-config %s: %v", path, err)
	}
	n := cfg.Notify
	for _, u := range []struct{ key, v string }{{"notify.public_url", n.PublicURL}, {"notify.ntfy.url", n.Ntfy.URL}} {
		if p, err := url.Parse(u.v); u.v != "" && (err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "") {
			return cfg, usagef("--bridge-config %s: %s %q is not an http(s) URL", path, u.key, u.v)
		}
	}
	for _, c := range n.Ntfy.Categories {
		if !slices.Contains(notify.NtfyCategories, c) {
			return cfg, usagef("--bridge-config %s: notify.ntfy.categories: %q is not one of %s", path, c, strings.Join(notify.NtfyCategories, ", "))
		}
	}
	if n.Ntfy.TokenFile != "" {
		if _, err := os.Stat(n.Ntfy.TokenFile); err != nil {
			return cfg, usagef("--bridge-config %s: notify.ntfy.token_file: %v", path, err)
		}
	}
	return cfg, nil
}

// notifyOptions are the bridge's notify.Options from the file; a public
// URL left out means the bridge's own address.
func (c bridgeFileConfig) notifyOptions() notify.Options {
	o := notify.Options{Subject: c.Notify.Subject, Ntfy: c.Notify.Ntfy}
	if pub := c.Notify.PublicURL; pub != "" {
		o.BaseURL = func() string { return pub }
	}
	return o
}
