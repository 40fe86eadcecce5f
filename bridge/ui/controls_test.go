package ui_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// sentenceKeys returns the keys of controls.js's CONTROL_SENTENCES table.
func sentenceKeys(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("static", "controls.js"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "export const CONTROL_SENTENCES = {")
	end := strings.Index(s[start:], "\n};")
	if start < 0 || end < 0 {
		t.Fatal("controls.js has no CONTROL_SENTENCES table")
	}
	var keys []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z_]+): `).FindAllStringSubmatch(s[start:start+end], -1) {
		keys = append(keys, m[1])
	}
	return keys
}

// TestEveryControlHasASentence: every control key the product acts on
// (agentbridge.ControlKeys, which the bridge checks appended controls
// against) has its sentence in the UI's one table, so no control event is
// ever shown as JSON.
func TestEveryControlHasASentence(t *testing.T) {
	have := sentenceKeys(t)
	for _, k := range agentbridge.ControlKeys {
		if !slices.Contains(have, k) {
			t.Errorf("control %q has no sentence in static/controls.js CONTROL_SENTENCES", k)
		}
	}
}
