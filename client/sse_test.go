package client

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

// parseAll returns every message of input and the error that ended parsing.
func parseAll(r io.Reader) ([]sseMessage, error) {
	p := newSSEParser(r)
	var out []sseMessage
	for {
		m, err := p.next()
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

func TestSSEParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []sseMessage
	}{
		{"one message", "id: 1\ndata: {\"a\":1}\n\n", []sseMessage{{id: "1", data: `{"a":1}`}}},
		{"multi-line data joins with LF", "data: a\ndata: b\ndata:c\n\n", []sseMessage{{data: "a\nb\nc"}}},
		{"CRLF endings", "id: 7\r\nevent: presence\r\ndata: x\r\n\r\n", []sseMessage{{id: "7", event: "presence", data: "x"}}},
		{"lone CR endings", "id: 8\rdata: y\r\r", []sseMessage{{id: "8", data: "y"}}},
		{"mixed endings", "data: a\r\ndata: b\rdata: c\n\r\n", []sseMessage{{data: "a\nb\nc"}}},
		{"comments and keep-alives skipped", ": keep-alive\n\n: hi\ndata: z\n\n", []sseMessage{{data: "z"}}},
		{"only one leading space dropped", "data:  two\n\n", []sseMessage{{data: " two"}}},
		{"no colon means empty value", "data\n\n", []sseMessage{{data: ""}}},
		{"empty data line dispatches", "data:\n\n", []sseMessage{{data: ""}}},
		{"no data means no dispatch", "id: 3\nevent: x\n\ndata: d\n\n", []sseMessage{{data: "d"}}},
		{"event type resets between messages", "event: presence\ndata: p\n\ndata: e\n\n", []sseMessage{{event: "presence", data: "p"}, {data: "e"}}},
		{"id with NUL ignored", "id: 1\x002\ndata: d\n\n", []sseMessage{{data: "d"}}},
		{"unknown fields ignored", "retry: 10\nfoo: bar\ndata: d\n\n", []sseMessage{{data: "d"}}},
		{"leading BOM dropped", "\xEF\xBB\xBFdata: d\n\n", []sseMessage{{data: "d"}}},
		{"unfinished message at EOF discarded", "data: a\n\ndata: b\n", []sseMessage{{data: "a"}}},
		{"colon inside value kept", "data: {\"k\":\"v:w\"}\n\n", []sseMessage{{data: `{"k":"v:w"}`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time as well, so that line ends split across
			// reads (a CR at the end of one read, its LF in the next) are
			// handled.
			for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in))} {
				got, err := parseAll(r)
				if !errors.Is(err, io.EOF) {
					t.Fatalf("parse ended with %v, want io.EOF", err)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("got %d messages %+v, want %+v", len(got), got, tt.want)
				}
				for i := range got {
					if got[i] != tt.want[i] {
						t.Errorf("message %d = %+v, want %+v", i, got[i], tt.want[i])
					}
				}
			}
		})
	}
}

func TestSSEParseLongLine(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 3<<20)
	got, err := parseAll(strings.NewReader("data: " + big + "\n\n"))
	if !errors.Is(err, io.EOF) || len(got) != 1 || got[0].data != big {
		t.Fatalf("a 3 MiB data line: got %d messages, err %v", len(got), err)
	}
	_, err = parseAll(strings.NewReader("data: " + strings.Repeat("x", maxSSELine+1) + "\n\n"))
	if err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("a line over the cap: err %v, want a line-length error", err)
	}
	_, err = parseAll(strings.NewReader(strings.Repeat("data: "+strings.Repeat("y", 1<<20)+"\n", 9) + "\n"))
	if err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("data over the cap in many lines: err %v, want a length error", err)
	}
}

// encodeSSE writes a message the way a conforming server does.
func encodeSSE(w *bytes.Buffer, m sseMessage, eol string) {
	if m.id != "" {
		w.WriteString("id: " + m.id + eol)
	}
	if m.event != "" {
		w.WriteString("event: " + m.event + eol)
	}
	for _, l := range strings.Split(m.data, "\n") {
		w.WriteString("data: " + l + eol)
	}
	w.WriteString(eol)
}

// FuzzSSEParse checks that arbitrary input never panics or loops, and that
// any message a conforming server can encode reads back unchanged whatever
// the line ending, with keep-alives interleaved.
func FuzzSSEParse(f *testing.F) {
	f.Add([]byte("id: 1\ndata: {}\n\n"), "42", "presence", "a\nb", uint8(0))
	f.Add([]byte(": keep-alive\r\n\r\ndata: x\r\n\r\n"), "", "", "{\"x\":1}", uint8(1))
	f.Add([]byte("data\rdata:\r\r"), "7", "", "", uint8(2))
	f.Add([]byte("\xEF\xBB\xBFevent: e\nid: \x00\ndata: d\n"), "1", "message", " lead", uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, id, event, data string, eolSel uint8) {
		msgs, err := parseAll(bytes.NewReader(raw))
		if err == nil {
			t.Fatal("parse of finite input ended without an error")
		}
		for _, m := range msgs {
			if len(m.data) > maxSSELine {
				t.Fatalf("message data of %d bytes exceeds the cap", len(m.data))
			}
		}

		// Round trip: fields cannot hold line breaks, and a conforming
		// server never writes a NUL in an id or a leading space it wants
		// kept in a field it does not own.
		if strings.ContainsAny(id+event, "\r\n\x00") || strings.ContainsAny(data, "\r") ||
			strings.HasPrefix(event, " ") || strings.HasPrefix(id, " ") {
			return
		}
		eol := []string{"\n", "\r\n", "\r"}[eolSel%3]
		want := sseMessage{id: id, event: event, data: data}
		var buf bytes.Buffer
		buf.WriteString(": keep-alive" + eol + eol)
		encodeSSE(&buf, want, eol)
		buf.WriteString(": keep-alive" + eol + eol)
		encodeSSE(&buf, want, eol)
		got, err := parseAll(iotest.HalfReader(&buf))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("round trip ended with %v", err)
		}
		if len(got) != 2 || got[0] != want || got[1] != want {
			t.Fatalf("round trip of %+v gave %+v", want, got)
		}
	})
}

// BenchmarkSSEParse measures parsing throughput on typical event messages
// (an id line and one data line of a few hundred bytes, CRLF endings).
func BenchmarkSSEParse(b *testing.B) {
	var buf bytes.Buffer
	data := `{"id":"01JD3Q6Y7M8K9N0P1Q2R3S4T5V","seq":42,"gseq":1093,"ts":"2026-11-21T10:00:00.123456Z","thread":"t","type":"message","from":"user","to":"all","content":"` + strings.Repeat("hello ", 40) + `","meta":{}}`
	for i := range 1000 {
		encodeSSE(&buf, sseMessage{id: strconv.Itoa(i), data: data}, "\r\n")
	}
	in := buf.Bytes()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		msgs, err := parseAll(bytes.NewReader(in))
		if !errors.Is(err, io.EOF) || len(msgs) != 1000 {
			b.Fatalf("parsed %d messages, %v", len(msgs), err)
		}
	}
}
