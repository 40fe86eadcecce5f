package agentbridge

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestClip: Clip cuts between runes, never inside one, and the result
// (ellipsis included) is at most n runes.
func TestClip(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 5, ""},
		{"short", 5, "short"},
		{"longer", 5, "long…"},
		{"ééééé", 5, "ééééé"},
		{"éééééé", 5, "éééé…"},
		{"日本語のテキスト", 4, "日本語…"},
		{"a😀b😀c", 3, "a😀…"},
		{"abc", 1, "…"},
	} {
		got := Clip(tt.s, tt.n)
		if got != tt.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
		if !utf8.ValidString(got) || utf8.RuneCountInString(got) > tt.n {
			t.Errorf("Clip(%q, %d) = %q: not text of at most %d runes", tt.s, tt.n, got, tt.n)
		}
	}
	// An error message quoting a long multi-byte value stays text: the
	// byte cut this replaced split "é" at byte 61.
	long := "a" + strings.Repeat("é", 100)
	in := EventInput{From: long}
	err := in.Validate()
	if err == nil || !utf8.ValidString(err.Error()) || !strings.Contains(err.Error(), "…") {
		t.Errorf("Validate of a long multi-byte sender: %v", err)
	}
}
