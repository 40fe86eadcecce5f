package main

import (
	"fmt"
	"io"
	"sync"
	"unicode/utf8"
)

// escaper writes text for a person's terminal: control characters that a
// terminal would act on are written as visible escapes instead, so that a
// message cannot retitle, clear or reprogram the terminal of whoever reads
// it (contract 6.2). C0 controls other than newline and tab, and DEL,
// become \xNN; C1 controls (U+0080–U+009F) become \u00NN; a byte that is
// not UTF-8 becomes \xNN. ESC is a C0 control, so an escape sequence is
// shown whole and does nothing.
//
// Run wraps the command's Stdout and Stderr in one, so every line of text
// goes through it; data (JSON, prompts, protocol streams) is written to
// Main.raw instead.
type escaper struct {
	// mu makes Write safe from several goroutines (loggers made apart
	// from one another share the daemon's stderr), as partial is state.
	mu sync.Mutex
	w  io.Writer
	// partial holds the start of a UTF-8 sequence that the previous
	// Write ended in the middle of.
	partial []byte
}

// newEscaper wraps w; an escaper is not wrapped twice.
func newEscaper(w io.Writer) io.Writer {
	if _, ok := w.(*escaper); ok {
		return w
	}
	return &escaper{w: w}
}

// unescaped returns the writer an escaper wraps, or w itself.
func unescaped(w io.Writer) io.Writer {
	if e, ok := w.(*escaper); ok {
		return e.w
	}
	return w
}

// Write escapes p and reports len(p) written when the escaped form was
// written whole.
func (e *escaper) Write(p []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.partial) == 0 && plain(p) {
		// The common case, plain text: written as it is, no copy.
		if _, err := e.w.Write(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	in := p
	if len(e.partial) > 0 {
		in = append(e.partial, p...)
		e.partial = nil
	}
	out := escapeText(nil, in, &e.partial)
	if _, err := e.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// plain reports whether p is printable ASCII, newlines and tabs only, so
// that nothing in it needs escaping.
func plain(p []byte) bool {
	for _, c := range p {
		if c >= 0x7f || (c < 0x20 && c != '\n' && c != '\t') {
			return false
		}
	}
	return true
}

// escapeText appends the escaped form of in to dst. With partial non-nil,
// an incomplete UTF-8 sequence at the end of in is kept there instead of
// being escaped, for the next call to complete.
func escapeText(dst, in []byte, partial *[]byte) []byte {
	for i := 0; i < len(in); {
		c := in[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
				dst = fmt.Appendf(dst, `\x%02x`, c)
			} else {
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(in[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			if partial != nil && !utf8.FullRune(in[i:]) {
				*partial = append([]byte(nil), in[i:]...)
				return dst
			}
			dst = fmt.Appendf(dst, `\x%02x`, c)
			i++
			continue
		case r >= 0x80 && r <= 0x9f:
			dst = fmt.Appendf(dst, `\u%04x`, r)
		default:
			dst = append(dst, in[i:i+size]...)
		}
		i += size
	}
	return dst
}
