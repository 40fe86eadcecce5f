package agentbridge

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ECodeBadQuery refuses a search query that cannot be parsed (contract
// 8.6): an unclosed quote, a * inside a word, no word at all.
const ECodeBadQuery = "bad_query"

// Bounds of a search (GET /search).
const (
	// DefaultSearchLimit and MaxSearchLimit bound a page of results.
	DefaultSearchLimit = 20
	MaxSearchLimit     = 100
	// MaxSearchQuery bounds a query's length in bytes, and MaxSearchTerms
	// its terms: a query is typed by a person or a model, and every term
	// is one more doclist the engine merges.
	MaxSearchQuery = 512
	MaxSearchTerms = 16
	// MaxSearchText bounds how much of an event's text is indexed, in
	// bytes: PostgreSQL refuses a tsvector over 1 MB, and a message
	// longer than this is found by its beginning.
	MaxSearchText = 64 << 10
	// minPrefix is the shortest prefix a query may end a word with: "a*"
	// would make the engine merge the doclists of every word that starts
	// with a.
	minPrefix = 2
)

// SearchTerm is one term of a query: a word (one token), a phrase (its
// tokens in a row), either ending in a prefix when Prefix is set.
type SearchTerm struct {
	Tokens []string
	Prefix bool
}

// SearchQuery is a parsed query: an event matches when its text matches
// every term.
type SearchQuery struct {
	Terms []SearchTerm
}

// SearchRequest is one search (GET /search): the query, its filters and
// its page.
type SearchRequest struct {
	Query SearchQuery
	// Threads, when not nil, are the only threads searched: the thread
	// filter, or the threads the credential may read, or both.
	Threads []string
	// From and Type keep only events with this sender and type ("" for
	// any).
	From, Type string
	// After and Before keep only events with a ts at or after After and
	// before Before (the events' form, "" for no bound).
	After, Before string
	// Cursor, when not 0, continues a page: only events with a smaller
	// gseq.
	Cursor int64
	// Limit is the page's size, 1 to MaxSearchLimit.
	Limit int
}

// SearchHit is one event that matched.
type SearchHit struct {
	Event Event
	// Rank is the store's relevance when it has one; the bridge reports
	// SearchRank.
	Rank float64
}

// SearchResult is one result of GET /search: the event, its thread, a
// snippet of its text around the matches and the engine's rank.
type SearchResult struct {
	Thread     string  `json:"thread"`
	ThreadName string  `json:"thread_name,omitempty"`
	Event      Event   `json:"event"`
	Snippet    string  `json:"snippet"`
	Marks      [][]int `json:"marks"`
	Rank       float64 `json:"rank"`
}

// SearchPage is the answer of GET /search: the results, newest first,
// and the cursor of the next page ("" when there is none).
type SearchPage struct {
	Results []SearchResult `json:"results"`
	Next    string         `json:"next"`
}

// badQuery is a bad_query error on field q.
func badQuery(format string, args ...any) *Error {
	return FieldErrorf(ECodeBadQuery, "q", format, args...)
}

// ParseSearchQuery parses a person's or a model's query: words, "quoted
// phrases" and prefixes (a word or phrase ending in *), all of which must
// match. Punctuation inside a word splits it as it splits the indexed text
// ("gpt-4" is the phrase "gpt 4"). What it cannot parse is bad_query, in a
// sentence that says what to change.
func ParseSearchQuery(q string) (SearchQuery, error) {
	if len(q) > MaxSearchQuery {
		return SearchQuery{}, badQuery("The query is %d bytes long; keep it under %d.", len(q), MaxSearchQuery)
	}
	if !utf8.ValidString(q) {
		return SearchQuery{}, badQuery("The query is not valid UTF-8 text.")
	}
	var out SearchQuery
	rest := q
	for {
		rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		if rest == "" {
			break
		}
		var raw string
		quoted := rest[0] == '"'
		if quoted {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return SearchQuery{}, badQuery("The query has a \" that is not closed, before %s: end the phrase with another \".", strconvQuote(Clip(rest[1:], 40)))
			}
			raw, rest = rest[1:1+end], rest[2+end:]
		} else {
			end := strings.IndexFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || r == '"' })
			if end < 0 {
				end = len(rest)
			}
			raw, rest = rest[:end], rest[end:]
		}
		prefix := false
		if quoted && strings.HasPrefix(rest, "*") {
			prefix, rest = true, rest[1:]
		}
		if !quoted && strings.HasSuffix(raw, "*") {
			prefix, raw = true, strings.TrimRight(raw, "*")
		}
		if strings.Contains(raw, "*") {
			return SearchQuery{}, badQuery("A * may only end a word (decid* finds decide and decision), not stand inside %s.", strconvQuote(Clip(raw, 41)))
		}
		if rest != "" && !quoted && rest[0] == '"' {
			return SearchQuery{}, badQuery("Put a space before the \" that starts a phrase, after %s.", strconvQuote(Clip(raw, 41)))
		}
		toks := SearchTokens(raw)
		if len(toks) == 0 {
			if prefix {
				return SearchQuery{}, badQuery("A * must follow a word of at least %d letters, such as decid*.", minPrefix)
			}
			continue // punctuation only: nothing to find
		}
		if prefix && utf8.RuneCountInString(toks[len(toks)-1]) < minPrefix {
			return SearchQuery{}, badQuery("A prefix needs at least %d letters before the *, not %s.", minPrefix, strconvQuote(toks[len(toks)-1]+"*"))
		}
		out.Terms = append(out.Terms, SearchTerm{Tokens: toks, Prefix: prefix})
		if len(out.Terms) > MaxSearchTerms {
			return SearchQuery{}, badQuery("The query has more than %d words and phrases; leave some out.", MaxSearchTerms)
		}
	}
	if len(out.Terms) == 0 {
		return SearchQuery{}, badQuery("The query has no word to search for; give at least one word, a \"phrase\" or a prefix such as decid*.")
	}
	return out, nil
}

// strconvQuote quotes s for a sentence.
func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }

// isTokenRune reports whether r belongs to a token: letters and digits
// (Unicode categories L and N), as SQLite's unicode61 tokenizer counts
// them; everything else separates tokens.
func isTokenRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }

// SearchTokens splits text into the tokens both stores index and match:
// runs of letters and digits, lowercased. It is the one tokenizer of the
// PostgreSQL index and of snippets; SQLite's unicode61 tokenizer (without
// diacritic folding) splits and folds the same way.
func SearchTokens(text string) []string {
	var toks []string
	forEachToken(text, func(start, end int) {
		toks = append(toks, strings.ToLower(text[start:end]))
	})
	return toks
}

// forEachToken calls fn with the byte range of each token of text, in
// order.
func forEachToken(text string, fn func(start, end int)) {
	start := -1
	for i, r := range text {
		switch {
		case isTokenRune(r) && start < 0:
			start = i
		case !isTokenRune(r) && start >= 0:
			fn(start, i)
			start = -1
		}
	}
	if start >= 0 {
		fn(start, len(text))
	}
}

// SearchText is the text of e that search indexes: a string content as
// it reads, the string values of an object content (a question's text, a
// notice's), a renamed thread's name; nothing for a control, whose values
// are ids and options. At most MaxSearchText bytes, cut at a rune.
func SearchText(e Event) string {
	if e.Type == TypeControl || len(e.Content) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(e.Content, &v) != nil {
		return ""
	}
	var b strings.Builder
	collectStrings(&b, v)
	s := b.String()
	if len(s) > MaxSearchText {
		cut := MaxSearchText
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// collectStrings writes every string value of v (not the keys), one per
// line.
func collectStrings(b *strings.Builder, v any) {
	switch x := v.(type) {
	case string:
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(x)
	case []any:
		for _, e := range x {
			collectStrings(b, e)
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			collectStrings(b, x[k])
		}
	}
}

// sortedKeys are m's keys in order, so that an object's text is the same
// every time.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// snippetTokens is how many tokens a snippet shows around its matches.
const snippetTokens = 24

// Snippet is the part of text around the matches of q, at most about
// snippetTokens tokens, with "…" where it was cut, and the matches' places
// in it as [start, end) offsets in runes (so that a browser, which counts
// UTF-16 units, and a terminal can both find them: Array.from gives runes).
// Without a match (the index and the text disagree) it is text's start.
func Snippet(text string, q SearchQuery) (string, [][]int) {
	type tok struct{ start, end int }
	var toks []tok
	var words []string
	forEachToken(text, func(s, e int) {
		toks = append(toks, tok{s, e})
		words = append(words, strings.ToLower(text[s:e]))
	})
	matched := make([]bool, len(toks))
	first := -1
	for _, t := range q.Terms {
		for i := 0; i+len(t.Tokens) <= len(words); i++ {
			if termAt(words, i, t) {
				for k := i; k < i+len(t.Tokens); k++ {
					matched[k] = true
				}
				if first < 0 || i < first {
					first = i
				}
			}
		}
	}
	lo, hi := 0, min(len(toks), snippetTokens)
	if first >= 0 {
		lo = max(0, first-snippetTokens/3)
		hi = min(len(toks), lo+snippetTokens)
		lo = max(0, hi-snippetTokens)
	}
	if len(toks) == 0 {
		return Clip(strings.TrimSpace(text), 200), [][]int{}
	}
	startByte, endByte := toks[lo].start, toks[hi-1].end
	if lo == 0 {
		startByte = 0
	}
	if hi == len(toks) {
		endByte = len(text)
	}
	var b strings.Builder
	if lo > 0 {
		b.WriteString("…")
	}
	body := strings.Join(strings.Fields(text[startByte:endByte]), " ")
	b.WriteString(body)
	if hi < len(toks) {
		b.WriteString("…")
	}
	out := b.String()
	marks := [][]int{}
	// The marks are found again in the cleaned text: its tokens are the
	// window's, in the same order.
	i := lo
	forEachToken(out, func(s, e int) {
		if i < hi && matched[i] {
			marks = append(marks, []int{utf8.RuneCountInString(out[:s]), utf8.RuneCountInString(out[:e])})
		}
		i++
	})
	return out, marks
}

// SearchRank is the relevance of text to q that both stores report:
// each term counts 1 + ln of how often it matches, and the sum is divided
// by ln of the text's length in tokens, so that a short message that says
// it often ranks above a long one that mentions it once. It is computed
// from the event's text rather than by the engine, whose ranking (FTS5's
// bm25) reads the whole doclist of every term: 200 ms for a word found in
// half of a million events, where the page itself takes a millisecond.
func SearchRank(text string, q SearchQuery) float64 {
	words := SearchTokens(text)
	score := 0.0
	for _, t := range q.Terms {
		n := 0
		for i := 0; i+len(t.Tokens) <= len(words); i++ {
			if termAt(words, i, t) {
				n++
			}
		}
		if n > 0 {
			score += 1 + math.Log(float64(n))
		}
	}
	return score / math.Log(float64(len(words))+2)
}

// termAt reports whether term t matches words starting at i.
func termAt(words []string, i int, t SearchTerm) bool {
	for k, tok := range t.Tokens {
		w := words[i+k]
		if t.Prefix && k == len(t.Tokens)-1 {
			if !strings.HasPrefix(w, tok) {
				return false
			}
			continue
		}
		if w != tok {
			return false
		}
	}
	return true
}

// SearchStore is a store that indexes its events for search (contract
// 8.6), in each append's transaction. Implementations are safe for
// concurrent use.
type SearchStore interface {
	// Search answers req: the matching events, newest first (by gseq),
	// at most req.Limit.
	Search(ctx context.Context, req SearchRequest) ([]SearchHit, error)
	// ThreadsInvited lists the threads participant is invited to now:
	// the threads an agent's token may search besides its own.
	ThreadsInvited(ctx context.Context, participant string) ([]string, error)
}
