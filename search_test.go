package agentbridge

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestParseSearchQuery: words, phrases and prefixes parse into their
// tokens; what cannot be parsed is bad_query with a sentence.
func TestParseSearchQuery(t *testing.T) {
	t.Parallel()
	ok := map[string]string{
		`deploy friday`:       `[deploy] [friday]`,
		`"the parser" decid*`: `[the parser] [decid*]`,
		`"the pars"*`:         `[the pars*]`,
		`GPT-4`:               `[gpt 4]`,
		`  café  `:            `[café]`,
		`, deploy`:            `[deploy]`,
	}
	for q, want := range ok {
		got, err := ParseSearchQuery(q)
		if err != nil {
			t.Errorf("%q: %v", q, err)
			continue
		}
		var parts []string
		for _, term := range got.Terms {
			s := strings.Join(term.Tokens, " ")
			if term.Prefix {
				s += "*"
			}
			parts = append(parts, "["+s+"]")
		}
		if g := strings.Join(parts, " "); g != want {
			t.Errorf("%q: %s, want %s", q, g, want)
		}
	}
	for _, q := range []string{`"unbalanced`, `a*b`, `*`, `a*`, ``, `   `, `!!!`, strings.Repeat("x ", 300), strings.Repeat("w ", 17), "bad\xff"} {
		if _, err := ParseSearchQuery(q); ErrorCode(err) != ECodeBadQuery || err.(*Error).Message == "" {
			t.Errorf("%q: %v, want bad_query", q, err)
		}
	}
}

// FuzzParseSearchQuery: the parser never panics, answers bad_query or a
// query whose tokens are non-empty runs of letters and digits, and the
// snippet of any text for it marks ranges inside the snippet.
func FuzzParseSearchQuery(f *testing.F) {
	for _, s := range []string{`deploy friday`, `"the parser" decid*`, `"unbalanced`, `a*b`, `"x"*`, `gpt-4`, `""`, `"a" "b"`} {
		f.Add(s, "We decided: the parser ships Friday, gpt-4 too.")
	}
	f.Fuzz(func(t *testing.T, q, text string) {
		pq, err := ParseSearchQuery(q)
		if err != nil {
			if ErrorCode(err) != ECodeBadQuery {
				t.Fatalf("%q: %v", q, err)
			}
			return
		}
		for _, term := range pq.Terms {
			for _, tok := range term.Tokens {
				if tok == "" || strings.IndexFunc(tok, func(r rune) bool { return !isTokenRune(r) }) >= 0 {
					t.Fatalf("%q: token %q", q, tok)
				}
			}
		}
		snip, marks := Snippet(text, pq)
		n := utf8.RuneCountInString(snip)
		for _, m := range marks {
			if m[0] < 0 || m[1] > n || m[0] >= m[1] {
				t.Fatalf("mark %v outside %q", m, snip)
			}
		}
		_ = SearchRank(text, pq)
	})
}
