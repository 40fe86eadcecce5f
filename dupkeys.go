package agentbridge

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// smallObjectKeys is how many keys of one object CheckJSONBody compares
// pairwise before it switches to a set, so that an object of many keys
// costs linear time and an ordinary one allocates nothing.
const smallObjectKeys = 16

// CheckJSONBody is the check every JSON request body of the bridge and the
// coordinator passes before it is decoded: its arrays and objects nest at
// most MaxJSONDepth deep (400 too_deep), its text is UTF-8
// (CheckJSONText) and no object in it, at any depth, holds a key twice,
// case aside (400 duplicate_key, naming the key's path, such as
// "content.pause.on").
// body must be valid JSON; a body the decoder refused is given to
// CheckJSONDepth, so that one nested past the decoder's own limit is
// answered too_deep as well.
func CheckJSONBody(body []byte) error {
	if err := CheckJSONDepth(body); err != nil {
		return err
	}
	if err := CheckJSONText(body); err != nil {
		return err
	}
	return CheckDuplicateKeys(body, "")
}

// CheckDuplicateKeys refuses valid JSON doc when an object in it holds a
// key twice, compared as decoded strings under Unicode simple case folding
// (as encoding/json matches a key to a struct field, so "on" and "On" are
// one key to it); prefix is the path of doc in the request body ("" for the
// body itself), for the error's field. Anything that is not valid JSON
// passes: reporting it is the decoder's job.
func CheckDuplicateKeys(doc []byte, prefix string) error {
	s := keyScan{b: doc}
	s.ws()
	path, found := s.value()
	if !found {
		return nil
	}
	key := path[0]
	field := joinPath(prefix, path)
	where := strings.TrimSuffix(strings.TrimSuffix(field, key), ".")
	// A client's keys may be of any length; the answer quotes a part.
	field, where = Clip(field, 4*QuoteRunes), Clip(where, 4*QuoteRunes)
	in := ""
	if where != "" {
		in = " in " + where
	}
	if s.first != key {
		return FieldErrorf(ECodeDuplicateKey, field, "The body has the keys %q and %q%s, which differ only in case and are one key to some JSON readers; send each key once.", Clip(s.first, QuoteRunes), Clip(key, QuoteRunes), in)
	}
	return FieldErrorf(ECodeDuplicateKey, field, "The body has the key %q twice%s; send each key once (JSON readers disagree about which one counts).", Clip(key, QuoteRunes), in)
}

// joinPath makes the dotted field of path, whose segments run from the
// duplicate key outwards (an array index is "[n]"), under prefix.
func joinPath(prefix string, path []string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i := len(path) - 1; i >= 0; i-- {
		seg := path[i]
		if b.Len() > 0 && !strings.HasPrefix(seg, "[") {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}

// keyScan walks a JSON document once, comparing the keys of each object.
// It trusts the document to be valid JSON and stops quietly at anything
// else.
type keyScan struct {
	b []byte
	i int
	// first is, once a key is found twice, its first spelling.
	first string
}

func (s *keyScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans the value at s.i. When an object in it holds a key twice it
// returns found and the path to that key, innermost segment first.
func (s *keyScan) value() (path []string, found bool) {
	if s.i >= len(s.b) {
		return nil, false
	}
	switch s.b[s.i] {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		s.str()
		return nil, false
	}
	// A number, true, false or null; on a stray delimiter (only in
	// invalid JSON) one byte is skipped, so that every call moves on.
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if s.i == start {
				s.i++
			}
			return nil, false
		}
		s.i++
	}
	return nil, false
}

// str scans the string at s.i and returns its raw text between the quotes
// and whether it holds an escape.
func (s *keyScan) str() (raw []byte, escaped bool) {
	s.i++
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			escaped = true
			s.i += 2
			continue
		case '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, escaped
		}
		s.i++
	}
	return s.b[start:], escaped
}

func (s *keyScan) object() (path []string, found bool) {
	s.i++
	var small [smallObjectKeys][]byte
	var seen map[string]string // folded key -> its spelling
	var buf [64]byte
	n := 0
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == '}' {
			s.i++
			return nil, false
		}
		if s.b[s.i] == ',' {
			s.i++
			s.ws()
		}
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return nil, false
		}
		key, escaped := s.str()
		if escaped {
			key = unescapeKey(key)
		}
		switch {
		case seen != nil:
			folded := appendFolded(buf[:0], key)
			if first, ok := seen[string(folded)]; ok {
				s.first = first
				return []string{string(key)}, true
			}
			seen[string(folded)] = string(key)
		default:
			for _, k := range small[:n] {
				if bytes.EqualFold(k, key) {
					s.first = string(k)
					return []string{string(key)}, true
				}
			}
			if n < len(small) {
				small[n] = key
				n++
				break
			}
			seen = make(map[string]string, 2*len(small))
			for _, k := range small {
				seen[string(appendFolded(buf[:0], k))] = string(k)
			}
			seen[string(appendFolded(buf[:0], key))] = string(key)
		}
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ':' {
			s.i++
		}
		s.ws()
		if inner, found := s.value(); found {
			return append(inner, string(key)), true
		}
	}
}

func (s *keyScan) array() (path []string, found bool) {
	s.i++
	for n := 0; ; n++ {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] == ']' {
			s.i++
			return nil, false
		}
		if s.b[s.i] == ',' {
			s.i++
			s.ws()
		}
		if inner, found := s.value(); found {
			return append(inner, "["+strconv.Itoa(n)+"]"), true
		}
	}
}

// unescapeKey decodes the escapes of a key's raw text, so that "a" and
// "\u0061" count as the same key, as they do to encoding/json.
func unescapeKey(raw []byte) []byte {
	var k string
	if err := json.Unmarshal([]byte(`"`+string(raw)+`"`), &k); err != nil {
		return raw
	}
	return []byte(k)
}

// appendFolded appends to out the one spelling of key that every key equal
// to it under Unicode simple case folding (bytes.EqualFold) shares: each
// rune becomes the smallest of its folding orbit ("k", "K" and the Kelvin
// sign all become "K"), and a byte that is not UTF-8 becomes U+FFFD, as
// EqualFold decodes it.
func appendFolded(out, key []byte) []byte {
	for i := 0; i < len(key); {
		if c := key[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(key[i:])
		i += size
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		out = utf8.AppendRune(out, least)
	}
	return out
}
