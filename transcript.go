package agentbridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// Transcript formats (GET /threads/{id}/transcript?format=).
const (
	TranscriptMarkdown = "md"
	TranscriptJSON     = "json"
)

// TranscriptEntry is one entry of the JSON transcript, seed 000's event
// log: T is seconds since the scene (or the thread) started.
type TranscriptEntry struct {
	T      float64 `json:"t"`
	From   string  `json:"from"`
	Type   string  `json:"type"`
	Target string  `json:"target,omitempty"`
	Text   string  `json:"text"`
	Reason string  `json:"reason,omitempty"`
}

// Transcript entry types (seed 000). Thinking is never in a transcript:
// it is private to its actor.
const (
	EntrySpawn   = "spawn"
	EntryBrief   = "brief"
	EntrySpeak   = "speak"
	EntryRoute   = "route"
	EntryCorrect = "correct"
	EntryJournal = "journal"
	EntryClose   = "close"
)

// TranscriptSource is what a transcript is rendered from: a thread's name
// and its whole log in seq order.
type TranscriptSource struct {
	ThreadName string
	Events     []Event
	Humans     Humans
	// Coordinator is the id the close and route entries are attributed to
	// ("coordinator" when empty, as in seed 000).
	Coordinator string
}

// ValidTranscriptFormat reports whether f is md or json.
func ValidTranscriptFormat(f string) bool { return f == TranscriptMarkdown || f == TranscriptJSON }

// RenderTranscript renders the thread's latest scene, or, when the thread
// never had one, its messages, in format md or json. Private events never
// appear. It is pure: the same source always gives the same bytes.
func RenderTranscript(src TranscriptSource, format string) ([]byte, error) {
	if !ValidTranscriptFormat(format) {
		return nil, FieldErrorf(ECodeInvalidField, "format", "The transcript format must be \"md\" or \"json\", not %q.", Clip(format, QuoteRunes))
	}
	t := buildTranscript(src)
	if format == TranscriptJSON {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(t.entries); err != nil {
			return nil, fmt.Errorf("encode transcript: %w", err)
		}
		return buf.Bytes(), nil
	}
	return []byte(t.markdown()), nil
}

// transcript is the parsed form both renderings share.
type transcript struct {
	title    string
	scene    *SceneState // nil for a plain thread
	start    time.Time
	end      time.Time
	names    []string
	lines    []transcriptLine
	entries  []TranscriptEntry
	messages int
}

type transcriptLine struct{ from, text string }

func buildTranscript(src TranscriptSource) *transcript {
	coord := src.Coordinator
	if coord == "" {
		coord = "coordinator"
	}
	// Fold the whole log to find the latest scene and its end.
	var st ThreadState
	for _, e := range src.Events {
		st = Fold(st, e, src.Humans)
	}
	scene := st.Scene
	t := &transcript{title: src.ThreadName, entries: []TranscriptEntry{}}
	if scene == nil {
		t.plain(src.Events)
		return t
	}
	t.scene = scene
	t.start = parseTS(scene.StartedAt)
	t.end = t.start
	t.names = scene.Actors
	since := func(e Event) float64 {
		ts := parseTS(e.TS)
		if ts.After(t.end) {
			t.end = ts
		}
		return math.Round(ts.Sub(t.start).Seconds()*1000) / 1000
	}
	for _, a := range scene.Actors {
		t.entries = append(t.entries, TranscriptEntry{From: coord, Type: EntrySpawn, Target: a, Text: "Spawning actor for " + a})
	}
	for _, a := range scene.Actors {
		t.entries = append(t.entries, TranscriptEntry{From: coord, Type: EntryBrief, Target: a, Text: "Sent actor system prompt + character + journal + scene perspective"})
	}
	var cur ThreadState
	for _, e := range src.Events {
		before := cur
		cur = Fold(cur, e, src.Humans)
		if e.Seq <= scene.StartSeq || IsPrivate(e) && e.Type != TypeJournal {
			continue
		}
		inScene := before.Scene != nil && before.Scene.StartID == scene.StartID
		if !inScene {
			continue
		}
		switch e.Type {
		case TypeMessage:
			m, ok := SceneMetaOf(e)
			if !ok || m.Turn == 0 || !before.Scene.Running() || !scene.HasActor(e.From) {
				continue
			}
			at := since(e)
			if m.Corrected {
				t.entries = append(t.entries, TranscriptEntry{T: at, From: coord, Type: EntryCorrect, Target: e.From, Text: "Asked " + e.From + " to reformat a malformed response"})
			}
			text := strings.TrimSpace(e.Text())
			t.lines = append(t.lines, transcriptLine{from: e.From, text: text})
			t.entries = append(t.entries, TranscriptEntry{T: at, From: e.From, Type: EntrySpeak, Text: text})
			if cur.Scene.Running() && scene.HasActor(e.To) {
				t.entries = append(t.entries, TranscriptEntry{T: at, From: coord, Type: EntryRoute, Target: e.To, Text: "Forwarding " + e.From + "'s speech to " + e.To})
			}
		case TypeSceneClosed:
			if before.Scene.Status == SceneClosed {
				continue
			}
			t.entries = append(t.entries, TranscriptEntry{T: since(e), From: coord, Type: EntryClose, Text: "Scene closed", Reason: cur.Scene.CloseReason})
		case TypeJournal:
			// The entry itself is private to its actor: only the fact
			// that it was written is part of the record.
			if scene.HasActor(e.From) {
				t.entries = append(t.entries, TranscriptEntry{T: since(e), From: e.From, Type: EntryJournal, Text: e.From + " wrote a journal entry"})
			}
		}
	}
	return t
}

// plain fills t from a thread without a scene: its messages, in order.
func (t *transcript) plain(events []Event) {
	seen := map[string]bool{}
	for _, e := range events {
		if e.Type != TypeMessage || IsPrivate(e) {
			continue
		}
		ts := parseTS(e.TS)
		if t.messages == 0 {
			t.start = ts
		}
		t.end = ts
		t.messages++
		if !seen[e.From] {
			seen[e.From] = true
			t.names = append(t.names, e.From)
		}
		text := strings.TrimSpace(e.Text())
		t.lines = append(t.lines, transcriptLine{from: e.From, text: text})
		entry := TranscriptEntry{T: math.Round(ts.Sub(t.start).Seconds()*1000) / 1000, From: e.From, Type: EntrySpeak, Text: text}
		if e.To != ToAll {
			entry.Target = e.To
		}
		t.entries = append(t.entries, entry)
	}
}

func (t *transcript) markdown() string {
	var b strings.Builder
	kind := "Thread"
	if t.scene != nil {
		kind = "Scene"
	}
	fmt.Fprintf(&b, "# %s — %s\n\n", kind, t.title)
	date := "—"
	if !t.start.IsZero() {
		date = t.start.UTC().Format("2006-01-02")
	}
	fmt.Fprintf(&b, "**Date:** %s\n", date)
	fmt.Fprintf(&b, "**Duration:** %s\n", duration(t.end.Sub(t.start)))
	fmt.Fprintf(&b, "**Participants:** %s\n", strings.Join(t.names, ", "))
	if t.scene != nil {
		fmt.Fprintf(&b, "**Setting:** %s\n", oneLine(t.scene.Setting))
	}
	b.WriteString("\n---\n\n")
	for _, l := range t.lines {
		fmt.Fprintf(&b, "**%s:** %s\n\n", strings.ToUpper(l.from), l.text)
	}
	if t.scene == nil {
		b.WriteString("---\n\n## Notes\n")
		fmt.Fprintf(&b, "- Messages: %d\n", t.messages)
		return b.String()
	}
	if t.scene.Status == SceneClosed {
		b.WriteString("*[end of scene]*\n\n")
	}
	b.WriteString("---\n\n## Post-scene notes\n")
	reason := t.scene.CloseReason
	if t.scene.Status == SceneRunning {
		reason = "still running"
	}
	fmt.Fprintf(&b, "- Close reason: %s\n", reason)
	per := make([]string, len(t.scene.Actors))
	for i, a := range t.scene.Actors {
		per[i] = fmt.Sprintf("%s: %d", a, t.scene.Turns[a])
	}
	fmt.Fprintf(&b, "- Turn count: %d (%s)\n", t.scene.Turn, strings.Join(per, ", "))
	fmt.Fprintf(&b, "- Coordinator's correction prompts issued: %d\n", t.scene.Corrections)
	return b.String()
}

// duration words a scene's length the way seed 000's header does.
func duration(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%d seconds", int(d.Round(time.Second).Seconds()))
	}
	m := int(d.Round(time.Minute).Minutes())
	if m == 1 {
		return "1 minute"
	}
	return fmt.Sprintf("%d minutes", m)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func parseTS(s string) time.Time {
	t, err := ParseTime(s)
	if err != nil {
		return time.Time{}
	}
	return t
}
