package bridge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// writeAppendAnswer writes the answer of an event POST. The common event
// (plain ASCII fields, a string or no content, meta without extra keys) is
// written by appendEventJSON; anything else goes through encoding/json.
// Every append answers this way, and encoding/json spent ~5 µs per answer,
// most of it compacting and re-checking the content's and meta's JSON.
//
// The answer is built in a buffer from bufs and copied into the connection's
// own buffer by Write, so the buffer goes back to bufs as soon as it is
// written.
func writeAppendAnswer(w http.ResponseWriter, res agentbridge.AppendResult, ignored *agentbridge.Ignored, bufs *bufPool) {
	buf := bufs.get()
	defer bufs.put(buf)
	b := append((*buf)[:0], `{"received":true,"event":`...)
	b, ok := appendEventJSON(b, res.Event)
	if !ok {
		httpjson.Write(w, http.StatusOK, appendAnswer{Received: true, Event: res.Event, Replayed: res.Replayed, Ignored: ignored})
		return
	}
	if res.Replayed {
		b = append(b, `,"replayed":true`...)
	}
	if ignored != nil {
		note, err := json.Marshal(ignored)
		if err == nil {
			b = append(append(b, `,"ignored":`...), note...)
		}
	}
	b = append(b, '}')
	*buf = b
	httpjson.WriteBytes(w, http.StatusOK, b)
}

// bufPool keeps byte buffers for answers. Its zero value is ready to use.
type bufPool struct{ p sync.Pool }

// maxPooledBuf is the largest buffer a bufPool keeps: an answer carrying a
// large content should not pin its buffer for ever.
const maxPooledBuf = 16 << 10

func (p *bufPool) get() *[]byte {
	if b, ok := p.p.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 1024)
	return &b
}

func (p *bufPool) put(b *[]byte) {
	if cap(*b) <= maxPooledBuf {
		p.p.Put(b)
	}
}

// appendEventJSON appends e to dst exactly as json.Marshal(e) writes it and
// reports true, or reports false (dst is then unchanged) when e has
// something whose encoding it leaves to encoding/json: a string (meta's
// included) that needs escaping, content that is not a JSON string (or
// null) or that encoding/json would rewrite, meta with extra keys. It
// decides by checking bytes only, never by escaping: the escaping rules
// stay encoding/json's alone. FuzzAppendEventJSON holds it to json.Marshal
// byte for byte.
func appendEventJSON(dst []byte, e agentbridge.Event) ([]byte, bool) {
	if !plainMeta(e.Meta) || !plainContent(e.Content) {
		return dst, false
	}
	for _, s := range [...]string{e.ID, e.TS, e.Thread, e.Type, e.From, e.To} {
		if !plainString(s) {
			return dst, false
		}
	}
	dst = append(dst, `{"id":"`...)
	dst = append(dst, e.ID...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendInt(dst, e.Seq, 10)
	dst = append(dst, `,"gseq":`...)
	dst = strconv.AppendInt(dst, e.GSeq, 10)
	dst = append(dst, `,"ts":"`...)
	dst = append(dst, e.TS...)
	dst = append(dst, `","thread":"`...)
	dst = append(dst, e.Thread...)
	dst = append(dst, `","type":"`...)
	dst = append(dst, e.Type...)
	dst = append(dst, `","from":"`...)
	dst = append(dst, e.From...)
	dst = append(dst, `","to":"`...)
	dst = append(dst, e.To...)
	dst = append(dst, `","content":`...)
	if e.Content == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, e.Content...)
	}
	dst = append(dst, `,"meta":`...)
	dst = appendMetaJSON(dst, e.Meta)
	return append(dst, '}'), true
}

// plainMeta reports whether appendMetaJSON writes m: no extra keys, and
// plain strings (see plainString) only.
func plainMeta(m agentbridge.Meta) bool {
	if len(m.Extra) > 0 || !plainString(m.ReplyTo) || !plainString(m.Via) {
		return false
	}
	for _, t := range m.Tags {
		if !plainString(t) {
			return false
		}
	}
	return true
}

// appendMetaJSON appends a plain m (see plainMeta) as Meta.MarshalJSON
// writes it: the typed keys in sorted order, hop and tags when set (tags
// even when empty), reply_to and via when not empty.
func appendMetaJSON(dst []byte, m agentbridge.Meta) []byte {
	dst = append(dst, '{')
	sep := func(dst []byte) []byte {
		if dst[len(dst)-1] != '{' {
			dst = append(dst, ',')
		}
		return dst
	}
	if m.Hop != nil {
		dst = append(dst, `"hop":`...)
		dst = strconv.AppendInt(dst, int64(*m.Hop), 10)
	}
	if m.ReplyTo != "" {
		dst = append(sep(dst), `"reply_to":"`...)
		dst = append(append(dst, m.ReplyTo...), '"')
	}
	if m.Tags != nil {
		dst = append(sep(dst), `"tags":[`...)
		for i, t := range m.Tags {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(append(append(dst, '"'), t...), '"')
		}
		dst = append(dst, ']')
	}
	if m.Via != "" {
		dst = append(sep(dst), `"via":"`...)
		dst = append(append(dst, m.Via...), '"')
	}
	return append(dst, '}')
}

// plainString reports whether json.Marshal writes s as its bytes between
// quotes: printable ASCII without the characters it escapes (the quote,
// the backslash, and <, > and & for HTML safety).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// plainContent reports whether encoding/json copies c (a json.RawMessage
// already checked to be valid JSON) unchanged: nil (written as null), or a
// single string token (stored content has no surrounding space) without
// the characters its HTML-safe compaction rewrites: <, > and &, and the
// line and paragraph separators U+2028 and U+2029. Escapes inside the
// string are kept as they are by the compaction, so they may stay.
func plainContent(c json.RawMessage) bool {
	if c == nil {
		return true
	}
	if len(c) < 2 || c[0] != '"' || c[len(c)-1] != '"' {
		return false
	}
	return !bytes.ContainsAny(c, "<>&") && !bytes.Contains(c, []byte("\u2028")) && !bytes.Contains(c, []byte("\u2029"))
}
