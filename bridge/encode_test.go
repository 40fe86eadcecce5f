package bridge

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// FuzzAppendEventJSON holds appendEventJSON to json.Marshal: whenever it
// takes an event, it must write exactly json.Marshal's bytes, and it must
// take the common event (plain fields, string content, meta without extra
// keys), or the append answer would silently fall back to the slow path.
func FuzzAppendEventJSON(f *testing.F) {
	for _, s := range []struct {
		from, content, replyTo, tags, via string
		seq                               int64
		hop                               int
	}{
		{"user", `"hello"`, "", "", "", 1, -1},
		{"codex", `"done\nsee <b>"`, "01M7ZVT3R8B0FYZ12TJX3V4WJ9", "bench", "coordinator", 42, 2},
		{"a", `{"invite":{"participant_id":"codex"}}`, "", "", "", 7, 0},
		{"a", `"caf\u00e9 \u2028 ok"`, "", "t,u", "", 3, -1},
		{"a", "\"caf\xc3\xa9 \xe2\x80\xa9\"", "", "", "v", 3, 5},
		{"a", "\"bad \xff utf8\"", "", "", "", 3, -1},
		{"a", `[1, 2]`, "", "", "", 3, -1},
		{"a", `null`, "", ",", "", 0, -1},
		{"a", ``, "", "", "", 0, -1},
		{"a<b", `"x"`, "r&d", "<t>", "v\u2028", -1, 1},
		{"a", `"tab\tquote\"back\\slash"`, "", "x,\"y", "", 9, -1},
		{"a", "\"ctl \x01\"", "", "", "\x7f", 9, -1},
	} {
		f.Add(s.from, s.content, s.replyTo, s.tags, s.via, s.seq, s.hop)
	}
	// tags is a comma-separated list ("" for none, "," for an empty one);
	// a negative hop means none.
	f.Fuzz(func(t *testing.T, from, content, replyTo, tags, via string, seq int64, hop int) {
		e := agentbridge.Event{
			ID: "01M7ZVT3R8B0FYZ12TJX3V4WJ9", Seq: seq, GSeq: seq * 3, TS: "2026-11-21T20:12:22.664727Z",
			Thread: "t1", Type: agentbridge.TypeMessage, From: from, To: agentbridge.ToAll,
			Meta: agentbridge.Meta{ReplyTo: replyTo, Via: via},
		}
		if hop >= 0 {
			e.Meta.Hop = &hop
		}
		if content != "" {
			if !json.Valid([]byte(content)) {
				return
			}
			e.Content = json.RawMessage(bytes.TrimSpace([]byte(content)))
		}
		switch tags {
		case "":
		case ",":
			e.Meta.Tags = []string{}
		default:
			e.Meta.Tags = strings.Split(tags, ",")
		}
		want, err := json.Marshal(e)
		got, ok := appendEventJSON(nil, e)
		if !ok {
			if plainString(from) && plainContent(e.Content) && plainMeta(e.Meta) {
				t.Fatalf("plain event %+v was left to encoding/json", e)
			}
			return
		}
		if err != nil {
			t.Fatalf("appendEventJSON took %+v, which json.Marshal refuses: %v", e, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("appendEventJSON wrote\n%s\njson.Marshal writes\n%s", got, want)
		}
	})
}

// TestAppendAnswerMatchesEncodingJSON checks the whole answer of an event
// POST, fast path and fallback, against encoding/json.
func TestAppendAnswerMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	hop := 2
	// One pool for every case, each written twice: an answer built in a
	// reused buffer must not carry anything of the one before.
	bufs := new(bufPool)
	for _, res := range []agentbridge.AppendResult{
		{Event: agentbridge.Event{ID: "E1", Seq: 1, GSeq: 1, TS: "2026-11-21T20:12:22.664727Z", Thread: "t", Type: "message", From: "user", To: "all", Content: json.RawMessage(`"hi"`)}},
		{Event: agentbridge.Event{ID: "E2", Seq: 2, GSeq: 5, TS: "2026-11-21T20:12:22.664728Z", Thread: "t", Type: "message", From: "codex", To: "user", Content: json.RawMessage(`"hi"`), Meta: agentbridge.Meta{Hop: &hop, Via: "coordinator", Tags: []string{}}}, Replayed: true},
		{Event: agentbridge.Event{ID: "E3", Seq: 3, GSeq: 6, TS: "2026-11-21T20:12:22.664729Z", Thread: "t", Type: "control", From: "user", To: "all", Content: json.RawMessage(`{"pause": {"on": true}}`), Meta: agentbridge.Meta{Extra: map[string]json.RawMessage{"x": json.RawMessage(`1`)}}}},
	} {
		writeAppendAnswer(httptest.NewRecorder(), res, nil, bufs)
		rec := httptest.NewRecorder()
		writeAppendAnswer(rec, res, nil, bufs)
		want, err := json.Marshal(appendAnswer{Received: true, Event: res.Event, Replayed: res.Replayed})
		if err != nil {
			t.Fatal(err)
		}
		if got := rec.Body.String(); got != string(want)+"\n" {
			t.Errorf("answer\n%s\nwant\n%s", got, want)
		}
		if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
		}
	}
}
