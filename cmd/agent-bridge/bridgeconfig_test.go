package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBridgeConfigAttachments: attachments.max_bytes is read from the
// --bridge-config file; a negative or huge one, or a misspelt key, is a
// usage error naming it.
func TestBridgeConfigAttachments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		body string
		want int64
		err  string
	}{
		{`{"attachments":{"max_bytes":1048576}}`, 1 << 20, ""},
		{`{}`, 0, ""},
		{`{"attachments":{"max_bytes":-1}}`, 0, "attachments.max_bytes -1"},
		{`{"attachments":{"max_bytes":2147483648}}`, 0, "attachments.max_bytes 2147483648"},
		{`{"attachments":{"maxbytes":5}}`, 0, "maxbytes"},
	} {
		path := filepath.Join(dir, "bridge.json")
		if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := readBridgeConfig(path)
		switch {
		case c.err == "" && (err != nil || cfg.Attachments.MaxBytes != c.want):
			t.Errorf("%s: %d, %v; want %d", c.body, cfg.Attachments.MaxBytes, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want an error naming %q", c.body, err, c.err)
		}
	}
	if got := attachmentDir(filepath.Join(dir, "data", "bridge.db")); got != filepath.Join(dir, "data") {
		t.Errorf("spool folder of a SQLite database = %q, want its folder", got)
	}
	if got := attachmentDir("postgres://u@h/db"); got != "" {
		t.Errorf("spool folder with PostgreSQL = %q, want the system's", got)
	}
}

// TestReadBridgeConfig: the --bridge-config file's ntfy categories are
// taken as written, and one the bridge does not know is refused with the
// known ones named; an unknown key is refused too.
func TestReadBridgeConfig(t *testing.T) {
	t.Parallel()
	write := func(body string) string {
		p := filepath.Join(t.TempDir(), "bridge.json")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := readBridgeConfig(write(`{"notify": {"ntfy": {"url": "https://ntfy.example/t", "categories": ["permission", "reply"]}}}`))
	if err != nil || !slices.Equal(cfg.Notify.Ntfy.Categories, []string{"permission", "reply"}) {
		t.Errorf("categories: %+v, %v", cfg.Notify.Ntfy, err)
	}
	for body, want := range map[string]string{
		`{"notify": {"ntfy": {"url": "https://ntfy.example/t", "categories": ["replies"]}}}`: `notify.ntfy.categories: "replies" is not one of permission, question, failed, reply`,
		`{"notify": {"ntfy": {"url": "https://ntfy.example/t", "replies": false}}}`:          `unknown field "replies"`,
	} {
		if _, err := readBridgeConfig(write(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", body, err, want)
		}
	}
}
