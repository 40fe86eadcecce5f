package agentbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MaxJSONDepth is how deeply the arrays and objects of a request body may
// nest, the body's own object counting as one (contract 8.3). encoding/json
// stops at 10,000, and an event nested just under that when accepted was
// over it once served inside a list: every later read of its thread
// failed, for the coordinator and `agent-bridge tail` alike.
const MaxJSONDepth = 64

// CheckJSONDepth refuses doc (400 too_deep) when its arrays and objects
// nest deeper than MaxJSONDepth. It reads bytes only, in one pass without
// recursion, so a body that is not even valid JSON (a million '[') is
// measured as cheaply as a valid one.
func CheckJSONDepth(doc []byte) error {
	if jsonDepthOver(doc, MaxJSONDepth) {
		return Errorf(ECodeTooDeep, "The body nests arrays and objects more than %d deep; send it with at most %d levels.", MaxJSONDepth, MaxJSONDepth)
	}
	return nil
}

// jsonDepthOver reports whether the arrays and objects of doc nest deeper
// than limit. Brackets inside strings do not count.
func jsonDepthOver(doc []byte, limit int) bool {
	depth := 0
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '"':
			// Skip the string: to its closing quote, past escapes.
			for i++; i < len(doc); i++ {
				j := bytes.IndexAny(doc[i:], `"\`)
				if j < 0 {
					return false
				}
				i += j
				if doc[i] == '"' {
					break
				}
				i++ // the escaped byte
			}
		case '{', '[':
			if depth++; depth > limit {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// tooDeepNote stands, in an event served from the store, for a value that
// nests deeper than MaxJSONDepth: one stored before the bridge refused
// such bodies.
var tooDeepNote = json.RawMessage(fmt.Sprintf(`"[a value nested deeper than %d levels, stored before such values were refused: not shown]"`, MaxJSONDepth))

// ClipTooDeep replaces, in an event read from a store, each meta value and
// a non-string content that nest deeper than MaxJSONDepth with a note
// saying so, and reports whether it replaced anything. Such values were
// accepted before the body check refused them; served as they are, they
// broke every reader of their thread (contract 8.3). The typed meta keys
// (hop, reply_to, tags, via) are never deep, and stay.
func (e *Event) ClipTooDeep() bool {
	clipped := false
	if len(e.Content) > 0 && (e.Content[0] == '{' || e.Content[0] == '[') && jsonDepthOver(e.Content, MaxJSONDepth) {
		e.Content = tooDeepNote
		clipped = true
	}
	for k, v := range e.Meta.Extra {
		if jsonDepthOver(v, MaxJSONDepth) {
			e.Meta.Extra[k] = tooDeepNote
			clipped = true
		}
	}
	return clipped
}
