package coordinator_test

import (
	"strings"
	"testing"

	"github.com/agent-bridge/agent-bridge/coordinator"
)

func TestParseDirective(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want coordinator.DirectiveKind
	}{
		{"plain reply", "Looks good to me.", coordinator.DirectiveReply},
		{"empty", "", coordinator.DirectiveReply},
		{"pass", "[PASS]", coordinator.DirectivePass},
		{"pass with blanks", "\n  [PASS] \n\n", coordinator.DirectivePass},
		{"pass in a sentence is a reply", "I would [PASS] on this one.", coordinator.DirectiveReply},
		{"pass then text is a reply", "[PASS]\nactually, one thing", coordinator.DirectiveReply},
		{"lower-case pass is a reply", "[pass]", coordinator.DirectiveReply},
		{"question", "[USER QUESTION]: ship it today?", coordinator.DirectiveQuestion},
		{"question on a later line", "I read the diff.\n  [USER QUESTION]: keep the old flag?", coordinator.DirectiveQuestion},
		{"question with CRLF", "context\r\n[USER QUESTION]: ok?\r\n", coordinator.DirectiveQuestion},
		{"question without colon is a reply", "[USER QUESTION] ok?", coordinator.DirectiveReply},
		{"question mid-line is a reply", "I have a [USER QUESTION]: maybe", coordinator.DirectiveReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := coordinator.ParseDirective(tt.in).Kind; got != tt.want {
				t.Errorf("ParseDirective(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzParseDirective: any output is classified without panicking, a pass
// is exactly the directive, and a question always holds its marker.
func FuzzParseDirective(f *testing.F) {
	for _, s := range []string{"", "[PASS]", " [PASS]\n", "x\n[USER QUESTION]: y", "[USER QUESTION]:", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := coordinator.ParseDirective(s)
		switch d.Kind {
		case coordinator.DirectivePass:
			if trimmed := strings.TrimSpace(s); trimmed != coordinator.PassDirective {
				t.Fatalf("%q passes but is not exactly the directive", s)
			}
		case coordinator.DirectiveQuestion:
			if !strings.Contains(s, coordinator.QuestionDirective) {
				t.Fatalf("%q is a question without the marker", s)
			}
		}
	})
}
