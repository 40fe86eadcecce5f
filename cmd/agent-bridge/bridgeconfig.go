package main

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
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
		// AllowPrivateEndpoints lets Web Push reach loopback, private,
		// link-local, shared and multicast addresses, and plain http on
		// loopback: for a push service on this machine (tests), never
		// for a bridge whose person tokens others hold.
		AllowPrivateEndpoints bool `json:"allow_private_endpoints"`
		// MaxSubscriptions bounds the push subscriptions in all
		// (agentbridge.DefaultMaxPushSubscriptions when 0).
		MaxSubscriptions int `json:"max_subscriptions"`
	} `json:"notify"`
	Attachments struct {
		// MaxBytes caps an uploaded file (contract 8.2; 25 MiB when 0).
		MaxBytes int64 `json:"max_bytes"`
	} `json:"attachments"`
	// CatchUp is how old a schedule's due time missed while the bridge
	// was down may be and still be posted at start (a Go duration, "1h"
	// by default; "0s" posts none).
	CatchUp *string `json:"catch_up"`
}

// maxAttachmentBytes is the largest attachments.max_bytes a bridge takes:
// a file is spooled to disk and written to the database in one step, and
// past a gigabyte that step is no longer a moment.
const maxAttachmentBytes = 1 << 30

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
	if mb := cfg.Attachments.MaxBytes; mb < 0 || mb > maxAttachmentBytes {
		return cfg, usagef("--bridge-config %s: attachments.max_bytes %d must be from 1 to %d (1 GiB); leave it out for 25 MiB", path, mb, int64(maxAttachmentBytes))
	}
	if cfg.CatchUp != nil {
		if d, err := time.ParseDuration(*cfg.CatchUp); err != nil || d < 0 {
			return cfg, usagef("--bridge-config %s: catch_up %q is not a duration such as \"1h\" or \"30m\"", path, *cfg.CatchUp)
		}
	}
	if n.MaxSubscriptions < 0 {
		return cfg, usagef("--bridge-config %s: notify.max_subscriptions must be 0 (the default, %d) or more", path, agentbridge.DefaultMaxPushSubscriptions)
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
	o := notify.Options{Subject: c.Notify.Subject, Ntfy: c.Notify.Ntfy,
		AllowPrivateEndpoints: c.Notify.AllowPrivateEndpoints, MaxSubscriptions: c.Notify.MaxSubscriptions}
	if pub := c.Notify.PublicURL; pub != "" {
		o.BaseURL = func() string { return pub }
	}
	return o
}

// attachmentDir is where the bridge spools uploads: next to a SQLite
// database, on the disk the file goes to (a system temp folder may be a
// tmpfs, in memory); the system's temp folder for PostgreSQL.
func attachmentDir(db string) string {
	if pg, _ := isPostgres("db", db); pg {
		return ""
	}
	return filepath.Dir(db)
}

// catchUp is the catch_up the file sets (schedule.DefaultCatchUp when it
// sets none; a tiny positive value when it sets "0s", which posts no missed
// due time).
func (c bridgeFileConfig) catchUp() time.Duration {
	if c.CatchUp == nil {
		return 0
	}
	d, _ := time.ParseDuration(*c.CatchUp)
	return max(d, time.Nanosecond)
}
