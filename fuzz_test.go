package agentbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// isValidationCode reports whether code is one decodeEventInput may
// return.
func isValidationCode(code string) bool {
	switch code {
	case ECodeMissingField, ECodeInvalidField, ECodeInvalidControl,
		ECodeUnknownField, ECodeFieldNotAllowed, ECodeInvalidJSON, ECodeDuplicateKey, ECodeTooDeep:
		return true
	}
	return false
}

// FuzzEventInput checks ParseEventInput followed by Validate (what the
// bridge and its store do with a body) on arbitrary bodies: it never
// panics; every failure is an *Error with a validation code and a message;
// every accepted input, encoded again, decodes to the same input, so what
// the server stores would pass its own validation.
func FuzzEventInput(f *testing.F) {
	for _, s := range []string{
		`{"from":"user","content":"hi"}`,
		`{"type":"message","from":"codex","to":"user","content":"done","meta":{"reply_to":"E1","tags":["a"],"via":"c","hop":2,"x":null}}`,
		`{"type":"control","from":"user","content":{"invite":{"participant_id":"codex","profile":{"client":"codex","model":"m","roles":["r"],"nickname":"n"}}}}`,
		`{"type":"control","from":"user","content":"{\"mute\":{\"targets\":[\"a\"],\"mode\":\"soft\"}}"}`,
		`{"type":"control","from":"user","content":{"discussion":{"on":true},"prod":["a"],"pause":{"on":false}}}`,
		`{"type":"control","from":"user","content":{"uninvite":{"participant_id":"x"},"unmute":{"targets":["x"]},"invited_auto":{"on":true}}}`,
		`{"type":"thread.renamed","from":"user","content":"name"}`,
		`{"type":"custom.x","from":"a","content":[1,{"b":null}]}`,
		`{"id":"x"}`, `{"nope":1}`, `{"from":1}`, `[]`, `null`, `{`, ``, `"x"`,
		`{"from":"user","content":"hi","meta":{"hop":-1}}`,
		`{"from":"user","content":"\u0000\ud800"}`,
		`{"from":"user","content":"hi","meta":{"tags":[]}}`,
		`{"type":"control","from":"user","content":{"uninvite":{"98":"1"},"unmute":{"22":true}}}`,
		`{"from":"user","content":"hi","meta":{"via":1,"tags":2,"reply_to":3,"hop":"x"}}`,
		`{"type":"control","from":"user","content":{"party":{"on":true,"agents":["a","a"],"max_agents":2,"cross_talk":true}}}`,
		`{"type":"control","from":"user","content":{"party":{"on":true,"max_agent":2}}}`,
		`{"type":"control","from":"user","content":{"invite":{"participant_id":"a","profile":{"client":"c","model":"m","expertise":["db"]}}}}`,
		`{"type":"control","from":"user","content":{"scene":{"on":true,"actors":["a","b"],"setting":"s","briefs":{"a":"x"},"first":"b","soft_cap":1,"hard_cap":2}}}`,
		`{"type":"control","from":"user","content":{"scene":{"on":true,"actors":["a"],"soft_cap":0}}}`,
		`{"type":"control","from":"user","content":{"scene":{"on":false}}}`,
		`{"type":"control","from":"codex","content":{"reset_session":{"participant_id":"claude"}}}`,
		`{"type":"control","from":"user","content":{"reset_session":{"participant_id":""}}}`,
		`{"type":"control","from":"user","content":{"invite":{"participant_id":"a","profile":{"client":"c","model":"m","character":"sheet"}}}}`,
		`{"from":"user","from":"evil","content":"hi"}`,
		`{"type":"message","type":"control","from":"user","content":{"pause":{"on":true}}}`,
		`{"type":"control","from":"user","content":{"pause":{"on":true,"on":false}}}`,
		`{"type":"control","from":"user","content":"{\"pause\":{\"on\":true},\"pause\":{\"on\":false}}"}`,
		`{"from":"user","content":{"a":[{"b":1,"\u0062":2}]}}`,
		`{"from":"user","content":"see","meta":{"attachments":[{"id":"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08","name":"../a.png","type":"x","size":1}]}}`,
		`{"from":"user","content":"see","meta":{"attachments":[{"id":"shot.png"}]}}`,
		`{"from":"user","content":"see","meta":{"attachments":{"id":1}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := decodeEventInput(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is %T, not *Error", err, err)
			}
			if !isValidationCode(e.Code) || e.Message == "" {
				t.Fatalf("error has code %q and message %q", e.Code, e.Message)
			}
			return
		}
		if in.From == "" || in.Type == "" || in.To == "" {
			t.Fatalf("accepted input without defaults: %+v", in)
		}
		if err := in.Validate(); err != nil {
			t.Fatalf("accepted input fails Validate: %v", err)
		}
		b1, err := json.Marshal(in)
		if err != nil {
			t.Fatalf("encode accepted input: %v", err)
		}
		again, err := decodeEventInput(b1)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", b1, err)
		}
		b2, err := json.Marshal(again)
		if err != nil {
			t.Fatalf("encode re-decoded input: %v", err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("round trip changed the input:\n%s\n%s", b1, b2)
		}
		if in.Type == TypeControl {
			if _, err := ParseControl(in.Content); err != nil {
				t.Fatalf("accepted control does not parse: %v", err)
			}
		}
	})
}

// FuzzFold checks that folding any control never panics and never changes
// the state it starts from.
func FuzzFold(f *testing.F) {
	f.Add(`{"invite":{"participant_id":"a","profile":{"client":"c","model":"m"}}}`, true)
	f.Add(`{"mute":{"targets":["a","b"],"mode":"soft"}}`, true)
	f.Add(`{"unmute":{"targets":["a"]},"uninvite":{"participant_id":"a"}}`, false)
	f.Add(`"{\"pause\":{\"on\":true}}"`, true)
	f.Add(`{"discussion":{"on":true,"allow_agent_mentions":false}}`, true)
	f.Add(`{"party":{"on":true,"agents":["a"],"max_agents":3,"cross_talk":false}}`, true)
	f.Add(`{"party":{"on":false}}`, true)
	f.Add(`{"scene":{"on":true,"actors":["a","b"],"first":"b","soft_cap":1,"hard_cap":1}}`, true)
	f.Add(`{"scene":{"on":false}}`, true)
	f.Fuzz(func(t *testing.T, content string, human bool) {
		from := "codex"
		if human {
			from = "user"
		}
		base := foldAll(DefaultHumans,
			inviteEvent("user", "a", "c", "m"), inviteEvent("user", "b", "c", "m"),
			control("user", `{"mute":{"targets":["a"]}}`), control("user", `{"mute":{"targets":["b"],"mode":"soft"}}`),
		)
		before, err := json.Marshal(base)
		if err != nil {
			t.Fatal(err)
		}
		_ = Fold(base, control(from, content), DefaultHumans)
		after, err := json.Marshal(base)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Fatalf("Fold changed its input:\n%s\n%s", before, after)
		}
	})
}

// FuzzCheckJSONText checks that a body CheckJSONText accepts decodes
// without encoding/json inventing a U+FFFD, and that a refusal of a valid
// JSON object names a field or says the body is not text.
func FuzzCheckJSONText(f *testing.F) {
	for _, s := range []string{
		`{"content":"h\u00e9llo \ud83d\ude00"}`, "{\"content\":\"caf\xe9\"}", `{"a":"\ud800"}`,
		`{"a":{"b":["\udc00"]}}`, `{"a":"\\ud800"}`, `{"a":"\ufffd"}`, "{\"a\":\"\xef\xbf\xbd\"}", `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		err := CheckJSONText(body)
		var v any
		if json.Unmarshal(body, &v) != nil {
			return
		}
		out, _ := json.Marshal(v)
		invented := bytes.Contains(out, []byte(`\ufffd`)) || bytes.Contains(out, []byte("\xef\xbf\xbd"))
		literal := bytes.Contains(bytes.ToLower(body), []byte(`\ufffd`)) || bytes.Contains(body, []byte("\xef\xbf\xbd"))
		if err == nil && invented && !literal {
			t.Fatalf("accepted %q, which decodes with U+FFFD: %s", body, out)
		}
		var e *Error
		if err != nil && (!errors.As(err, &e) || (e.Code != ECodeInvalidField && e.Code != ECodeInvalidJSON)) {
			t.Fatalf("refused %q with %v", body, err)
		}
	})
}

// decodeEventInput is the bridge's path for a body: ParseEventInput, then
// Validate (the store's Append runs it), with nothing of a refused input.
func decodeEventInput(body []byte) (EventInput, error) {
	in, err := ParseEventInput(body)
	if err != nil {
		return EventInput{}, err
	}
	if err := in.Validate(); err != nil {
		return EventInput{}, err
	}
	return in, nil
}
