package agentbridge

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// CheckJSONText refuses a JSON document whose strings are not valid text:
// raw bytes that are not UTF-8, or a \u escape naming half of a surrogate
// pair without the other half. encoding/json would replace either with
// U+FFFD and so store something other than what the client meant; a client
// sending Latin-1 should hear about it instead. The error names the field
// (dotted through nested objects, such as "meta.via"). body must be valid
// JSON; a well-formed body is checked in one pass without allocating.
func CheckJSONText(body []byte) error {
	if validJSONText(body) {
		return nil
	}
	field := badTextField(body, "")
	if field == "" {
		return Errorf(ECodeInvalidJSON, "The request body is not valid UTF-8 text: send JSON encoded as UTF-8.")
	}
	return FieldErrorf(ECodeInvalidField, field, "The field %q is not valid UTF-8 text: send JSON encoded as UTF-8 (a \\u escape must not name half a surrogate pair).", field)
}

// badTextField returns the dotted path of the first field (in key order)
// whose value is not valid text, descending into objects; "" when the
// fault is in a key or the document is not an object.
func badTextField(doc []byte, prefix string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(doc, &obj) != nil || obj == nil {
		return ""
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		v := obj[k]
		if validJSONText(v) {
			continue
		}
		if inner := badTextField(v, prefix+k+"."); inner != "" {
			return inner
		}
		return prefix + k
	}
	return ""
}

// validJSONText reports whether b is UTF-8 and every \u escape in it that
// names a surrogate is a well-formed pair.
func validJSONText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for {
		i := bytes.IndexByte(b, '\\')
		if i < 0 || i+1 >= len(b) {
			return true
		}
		if b[i+1] != 'u' {
			b = b[i+2:] // any other escape is one character: skip it
			continue
		}
		r, ok := hex4(b[i+2:])
		if !ok {
			return true // not valid JSON; the decoder says so
		}
		b = b[i+6:]
		switch {
		case utf16.IsSurrogate(r) && r < 0xDC00:
			if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
				return false
			}
			lo, ok := hex4(b[2:])
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			b = b[6:]
		case utf16.IsSurrogate(r):
			return false // a low half on its own
		}
	}
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// QuoteRunes is how much of a client's value an error message quotes back,
// in runes, the ellipsis included (see Clip).
const QuoteRunes = 64

// Clip shortens s to at most n runes (n ≥ 1), the ellipsis that marks a
// cut included: s itself when it is that short, else its first n-1 runes
// and "…". It cuts between runes, never inside one, so that a clipped
// value is still text (an invalid byte of s counts as one rune and is kept
// as it is). Every shortening of text for people goes through it: error
// messages quoting a client's value (QuoteRunes), progress statuses.
func Clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	k := 0
	for i := range s {
		if k == n-1 {
			return s[:i] + "…"
		}
		k++
	}
	return s
}
