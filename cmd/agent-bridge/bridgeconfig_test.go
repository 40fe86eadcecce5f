package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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
