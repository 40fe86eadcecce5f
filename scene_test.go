package agentbridge

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestParseSceneControl(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		want    *SceneControl
		field   string
	}{
		{name: "full", content: `{"scene":{"on":true,"actors":["maria","sam"],"setting":"a kitchen","briefs":{"maria":"host"},"first":"sam","soft_cap":3,"hard_cap":5}}`,
			want: &SceneControl{On: true, Actors: []string{"maria", "sam"}, Setting: "a kitchen", Briefs: map[string]string{"maria": "host"}, First: "sam", SoftCap: 3, HardCap: 5}},
		{name: "defaults", content: `{"scene":{"on":true,"actors":["a","b","c"]}}`,
			want: &SceneControl{On: true, Actors: []string{"a", "b", "c"}, First: "a", SoftCap: DefaultSoftCap, HardCap: DefaultHardCap}},
		{name: "off", content: `{"scene":{"on":false}}`, want: &SceneControl{}},
		{name: "off ignores the rest", content: `{"scene":{"on":false,"actors":["x"]}}`, want: &SceneControl{}},
		{name: "without on", content: `{"scene":{"actors":["a","b"]}}`, field: "content.scene.on"},
		{name: "not an object", content: `{"scene":true}`, field: "content.scene"},
		{name: "null", content: `{"scene":null}`, field: "content.scene"},
		{name: "one actor", content: `{"scene":{"on":true,"actors":["a"]}}`, field: "content.scene.actors"},
		{name: "no actors", content: `{"scene":{"on":true}}`, field: "content.scene.actors"},
		{name: "actor twice", content: `{"scene":{"on":true,"actors":["a","a"]}}`, field: "content.scene.actors"},
		{name: "invalid actor id", content: `{"scene":{"on":true,"actors":["a","b c"]}}`, field: "content.scene.actors"},
		{name: "first not an actor", content: `{"scene":{"on":true,"actors":["a","b"],"first":"c"}}`, field: "content.scene.first"},
		{name: "zero soft cap", content: `{"scene":{"on":true,"actors":["a","b"],"soft_cap":0}}`, field: "content.scene.soft_cap"},
		{name: "negative hard cap", content: `{"scene":{"on":true,"actors":["a","b"],"hard_cap":-1}}`, field: "content.scene.hard_cap"},
		{name: "soft cap beyond the bound", content: `{"scene":{"on":true,"actors":["a","b"],"soft_cap":1001,"hard_cap":1001}}`, field: "content.scene.soft_cap"},
		{name: "hard cap of 1e18", content: `{"scene":{"on":true,"actors":["a","b"],"hard_cap":1000000000000000000}}`, field: "content.scene.hard_cap"},
		{name: "caps at the bound", content: `{"scene":{"on":true,"actors":["a","b"],"soft_cap":1000,"hard_cap":1000}}`,
			want: &SceneControl{On: true, Actors: []string{"a", "b"}, First: "a", SoftCap: 1000, HardCap: 1000}},
		{name: "soft over hard", content: `{"scene":{"on":true,"actors":["a","b"],"soft_cap":9,"hard_cap":5}}`, field: "content.scene.soft_cap"},
		{name: "hard under default soft", content: `{"scene":{"on":true,"actors":["a","b"],"hard_cap":5}}`, field: "content.scene.hard_cap"},
		{name: "cap not a number", content: `{"scene":{"on":true,"actors":["a","b"],"soft_cap":"3"}}`, field: "content.scene"},
		{name: "brief for a stranger", content: `{"scene":{"on":true,"actors":["a","b"],"briefs":{"z":"x"}}}`, field: "content.scene.briefs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseControl(json.RawMessage(tt.content))
			if tt.field != "" {
				e, ok := err.(*Error)
				if !ok || e.Code != ECodeInvalidControl || e.Field != tt.field {
					t.Fatalf("err = %v, want invalid_control on %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Scene, tt.want) {
				t.Errorf("scene = %+v, want %+v", c.Scene, tt.want)
			}
		})
	}
}

func TestCheckSceneControl(t *testing.T) {
	t.Parallel()
	var s ThreadState
	for _, id := range []string{"maria", "sam"} {
		s = Fold(s, ctl("user", fmt.Sprintf(`{"invite":{"participant_id":%q,"profile":{"client":"c","model":"m","character":"sheet of %s"}}}`, id, id)), DefaultHumans)
	}
	if inv, _ := s.Invited("maria"); inv.Profile.Character != "sheet of maria" {
		t.Fatalf("character not kept: %+v", inv.Profile)
	}
	in := func(c string) EventInput {
		return EventInput{Type: TypeControl, From: "user", Content: json.RawMessage(c)}
	}
	if err := checkSceneControl(s, controlOf(t, in(`{"scene":{"on":true,"actors":["maria","sam"]}}`))); err != nil {
		t.Fatalf("valid scene refused: %v", err)
	}
	err := checkSceneControl(s, controlOf(t, in(`{"scene":{"on":true,"actors":["maria","bob"]}}`)))
	if e, ok := err.(*Error); !ok || e.Field != "content.scene.actors" || !strings.Contains(e.Message, "bob") {
		t.Fatalf("uninvited actor: %v", err)
	}
	s = Fold(s, ctl("user", `{"scene":{"on":true,"actors":["maria","sam"]}}`), DefaultHumans)
	if err := checkSceneControl(s, controlOf(t, in(`{"scene":{"on":true,"actors":["maria","sam"]}}`))); ErrorCode(err) != ECodeInvalidControl {
		t.Fatalf("second scene while one runs: %v", err)
	}
	if err := checkSceneControl(s, controlOf(t, in(`{"scene":{"on":false}}`))); err != nil {
		t.Fatalf("off refused: %v", err)
	}
}

var testClock = time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)

// sceneLog builds a thread log event by event, with ts one second apart.
type sceneLog struct {
	events []Event
}

func (l *sceneLog) add(e Event) Event {
	e.Seq = int64(len(l.events) + 1)
	e.ID = fmt.Sprintf("e%02d", e.Seq)
	e.Thread = "t"
	e.TS = FormatTime(testClock.Add(time.Duration(e.Seq) * time.Second))
	if e.To == "" {
		e.To = ToAll
	}
	l.events = append(l.events, e)
	return e
}

func (l *sceneLog) state() ThreadState {
	var s ThreadState
	for _, e := range l.events {
		s = Fold(s, e, DefaultHumans)
	}
	return s
}

func ctl(from, content string) Event {
	return Event{Type: TypeControl, From: from, To: ToAll, Content: json.RawMessage(content)}
}

func speech(from, to string, turn int, text string, corrected bool) Event {
	m := SceneMeta{Turn: turn, Corrected: corrected}
	b, _ := json.Marshal(m)
	s, _ := json.Marshal(text)
	return Event{Type: TypeMessage, From: from, To: to, Content: s, Meta: Meta{Extra: map[string]json.RawMessage{MetaScene: b}}}
}

func private(typ, from, text string) Event {
	s, _ := json.Marshal(text)
	return Event{Type: typ, From: from, To: from, Content: s, Meta: Meta{Extra: map[string]json.RawMessage{MetaPrivate: json.RawMessage("true")}}}
}

func closed(reason string) Event {
	s, _ := json.Marshal(reason)
	return Event{Type: TypeSceneClosed, From: "bridge-coordinator", To: ToAll, Content: s}
}

func startScene(l *sceneLog, extra string) {
	l.add(Event{Type: TypeThreadCreated, From: "user", Content: json.RawMessage(`"kitchen"`)})
	for _, id := range []string{"maria", "sam"} {
		l.add(ctl("user", fmt.Sprintf(`{"invite":{"participant_id":%q,"profile":{"client":"c","model":"m"}}}`, id)))
	}
	l.add(ctl("user", `{"scene":{"on":true,"actors":["maria","sam"],"setting":"A small kitchen, morning."`+extra+`}}`))
}

func TestFoldSceneNaturalClose(t *testing.T) {
	t.Parallel()
	l := &sceneLog{}
	startScene(l, "")
	s := l.state()
	if !s.Scene.Running() || s.Scene.Next != "maria" || s.Scene.Turns["sam"] != 0 {
		t.Fatalf("started scene: %+v", s.Scene)
	}
	l.add(speech("maria", "sam", 1, "Hi, come in.", false))
	l.add(speech("sam", "maria", 2, "I should head out soon, thank you both.", false))
	s = l.state()
	if !s.Scene.Running() || s.Scene.CloseAfter != "maria" {
		t.Fatalf("after a closing line the scene waits for the other's answer: %+v", s.Scene)
	}
	before := s
	l.add(speech("maria", "sam", 3, "Take care.", false))
	s = l.state()
	if reason, ok := SceneClosedBy(before, s); !ok || reason != CloseNatural {
		t.Fatalf("natural close = %q %v; scene %+v", reason, ok, s.Scene)
	}
	l.add(closed(CloseNatural))
	s = l.state()
	if s.Scene.Status != SceneClosed || s.Scene.Turn != 3 || s.Scene.Turns["maria"] != 2 {
		t.Fatalf("closed scene: %+v", s.Scene)
	}
}

func TestFoldSceneCapsAndExplicit(t *testing.T) {
	t.Parallel()
	l := &sceneLog{}
	startScene(l, `,"soft_cap":1,"hard_cap":2`)
	l.add(speech("maria", "sam", 1, "One.", false))
	s := l.state()
	if st, ok := SceneStepFor(s, l.events[len(l.events)-1], "maria"); !ok || st.Nudge != SoftCapPrompt || st.Turn != 2 {
		t.Fatalf("maria past the soft cap gets the nudge: %+v %v", st, ok)
	}
	if st, _ := SceneStepFor(s, l.events[len(l.events)-1], "sam"); st.Nudge != "" {
		t.Fatalf("sam has not reached the soft cap: %+v", st)
	}
	l.add(speech("sam", "maria", 2, "Two.", true))
	l.add(speech("maria", "sam", 3, "Three.", false))
	s = l.state()
	if s.Scene.Status != SceneClosing || s.Scene.CloseReason != CloseHardCap || s.Scene.Corrections != 1 {
		t.Fatalf("hard cap: %+v", s.Scene)
	}

	l = &sceneLog{}
	startScene(l, "")
	l.add(speech("maria", "sam", 1, "*[the scene ends here]*", false))
	if s := l.state(); s.Scene.CloseReason != CloseExplicit {
		t.Fatalf("explicit: %+v", s.Scene)
	}
	l = &sceneLog{}
	startScene(l, "")
	l.add(ctl("codex", `{"scene":{"on":false}}`))
	if s := l.state(); !s.Scene.Running() {
		t.Fatalf("a non-human's off control counts: %+v", s.Scene)
	}
	l.add(ctl("user", `{"scene":{"on":false}}`))
	if s := l.state(); s.Scene.CloseReason != CloseExplicit || s.Scene.Status != SceneClosing {
		t.Fatalf("off control: %+v", s.Scene)
	}
}

func TestFoldSceneIsPure(t *testing.T) {
	t.Parallel()
	l := &sceneLog{}
	startScene(l, "")
	s := l.state()
	snapshot, _ := json.Marshal(s)
	_ = Fold(s, l.add(speech("maria", "sam", 1, "Hello.", false)), DefaultHumans)
	again, _ := json.Marshal(s)
	if string(snapshot) != string(again) {
		t.Fatalf("Fold modified its input:\n%s\n%s", snapshot, again)
	}
}

func TestClosingLines(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"Well — thank you both, this was generous.", "I’ll let you go.", "*[puts on her coat and nods]* Safe travels.", "*[walks out]*"} {
		if !IsClosingLine(s) {
			t.Errorf("IsClosingLine(%q) = false", s)
		}
	}
	for _, s := range []string{"Thank you.", "Goodbye is a strange word.", "*[tea leaves swirl]*", "She exits? No. *[sits]*", "I let you go once."} {
		if IsClosingLine(s) {
			t.Errorf("IsClosingLine(%q) = true; the list must err toward going on", s)
		}
	}
}

func TestParseSceneOutput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		out, thinking, speech string
		ok                    bool
	}{
		{"<thinking>hm</thinking>\n<speech>Hi.</speech>", "hm", "Hi.", true},
		{"preamble <thinking>\n a \n</thinking> x <speech> b </speech> trailer", "a", "b", true},
		{"<thinking></thinking><speech>Only speech.</speech>", "", "Only speech.", true},
		{"Hi.", "", "", false},
		{"<speech>Hi.</speech>", "", "", false},
		{"<thinking>x</thinking>", "", "", false},
		{"<thinking>x</thinking><speech>  </speech>", "", "", false},
		{"<speech>Hi.</speech><thinking>x</thinking>", "", "", false},
		{"<thinking>x<speech>Hi.</speech>", "", "", false},
	}
	for _, tt := range tests {
		th, sp, ok := ParseSceneOutput(tt.out)
		if ok != tt.ok || th != tt.thinking || sp != tt.speech {
			t.Errorf("ParseSceneOutput(%q) = %q, %q, %v", tt.out, th, sp, ok)
		}
	}
}

func FuzzParseSceneOutput(f *testing.F) {
	f.Add("<thinking>a</thinking><speech>b</speech>")
	f.Add("<speech>")
	f.Fuzz(func(t *testing.T, out string) {
		th, sp, ok := ParseSceneOutput(out)
		if !ok {
			return
		}
		if sp == "" || strings.Contains(sp, "</speech>") || strings.Contains(th, "</thinking>") {
			t.Fatalf("bad split of %q: %q %q", out, th, sp)
		}
	})
}

func TestVisibleTo(t *testing.T) {
	t.Parallel()
	events := []Event{
		{ID: "1", Type: TypeMessage, From: "maria"},
		private(TypeThinking, "maria", "secret"),
		private(TypeJournal, "sam", "diary"),
	}
	if got := VisibleTo(events, "sam"); len(got) != 2 || got[1].Type != TypeJournal {
		t.Fatalf("sam sees %+v", got)
	}
	if got := VisibleTo(events, "maria"); len(got) != 2 || got[1].Type != TypeThinking {
		t.Fatalf("maria sees %+v", got)
	}
	if got := VisibleTo(events, "user"); len(got) != 1 {
		t.Fatalf("user sees %+v", got)
	}
}

// TestTranscriptGolden pins both formats for a closed scene and for a plain
// thread. Run `go test -run TestTranscriptGolden -update .` after an
// intended change.
func TestTranscriptGolden(t *testing.T) {
	t.Parallel()
	scene := &sceneLog{}
	startScene(scene, `,"briefs":{"maria":"You are expecting Sam."}`)
	scene.add(private(TypeThinking, "maria", "SECRET-MARIA there is a knock"))
	scene.add(speech("maria", "sam", 1, "*[opens the door]* Hi, come in.", false))
	scene.add(private(TypeThinking, "sam", "SECRET-SAM she looks tired"))
	scene.add(speech("sam", "maria", 2, "Thanks. I brought bread.", true))
	scene.add(speech("maria", "sam", 3, "Thank you both — you and the bread.", false))
	scene.add(speech("sam", "maria", 4, "*[laughs]* Anytime.", false))
	scene.add(closed(CloseNatural))
	scene.add(private(TypeJournal, "maria", "SECRET-JOURNAL today Sam came"))

	plain := &sceneLog{}
	plain.add(Event{Type: TypeThreadCreated, From: "user", Content: json.RawMessage(`"chat"`)})
	plain.add(Event{Type: TypeMessage, From: "user", To: "codex", Content: json.RawMessage(`"hello @codex"`)})
	plain.add(private(TypeThinking, "codex", "SECRET-CODEX"))
	plain.add(Event{Type: TypeMessage, From: "codex", Content: json.RawMessage(`"hi"`)})
	for _, c := range []struct {
		name string
		log  *sceneLog
	}{{"scene", scene}, {"thread", plain}} {
		for _, format := range []string{TranscriptMarkdown, TranscriptJSON} {
			got, err := RenderTranscript(TranscriptSource{ThreadName: "kitchen", Events: c.log.events, Humans: DefaultHumans}, format)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(got), "SECRET") {
				t.Errorf("%s.%s holds a private event:\n%s", c.name, format, got)
			}
			path := filepath.Join("testdata", "transcript", c.name+"."+format)
			if *updateGolden {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("read golden (run with -update to create): %v", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s differs from the golden file:\n%s", path, got)
			}
		}
	}
	if _, err := RenderTranscript(TranscriptSource{}, "html"); ErrorCode(err) != ECodeInvalidField {
		t.Errorf("bad format: %v", err)
	}
}

// benchScene is a closed scene at the hard cap: 60 turns each.
func benchScene() *sceneLog {
	l := &sceneLog{}
	startScene(l, "")
	for i := 1; i <= 2*DefaultHardCap; i++ {
		from, to := "maria", "sam"
		if i%2 == 0 {
			from, to = to, from
		}
		l.add(private(TypeThinking, from, "a private thought of some length, as actors write them"))
		l.add(speech(from, to, i, "A line of dialogue of ordinary length, said aloud in the kitchen.", false))
	}
	l.add(closed(CloseHardCap))
	return l
}

// BenchmarkRenderTranscript renders a 120-turn scene (242 events) as md.
func BenchmarkRenderTranscript(b *testing.B) {
	src := TranscriptSource{ThreadName: "kitchen", Events: benchScene().events, Humans: DefaultHumans}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RenderTranscript(src, TranscriptMarkdown); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFoldSpeech folds one speech into a running scene: the cost a
// scene adds to every message the bridge appends in it.
func BenchmarkFoldSpeech(b *testing.B) {
	l := &sceneLog{}
	startScene(l, "")
	s := l.state()
	e := l.add(speech("maria", "sam", 1, "Hello there.", false))
	b.ReportAllocs()
	for b.Loop() {
		_ = Fold(s, e, DefaultHumans)
	}
}

// TestSceneStateString: the one-line form names the awaited actor while
// the scene runs, and the close reason once it closed.
func TestSceneStateString(t *testing.T) {
	t.Parallel()
	sc := &SceneState{Status: SceneRunning, Actors: []string{"maria", "sam"}, Turns: map[string]int{"maria": 2, "sam": 1}, SoftCap: 40, HardCap: 60, Next: "sam"}
	if got, want := sc.String(), "running, turns: maria 2, sam 1 (soft cap 40, hard cap 60), next: sam"; got != want {
		t.Errorf("running: %q, want %q", got, want)
	}
	sc.Status, sc.CloseReason = SceneClosed, CloseNatural
	if got := sc.String(); strings.Contains(got, "next:") || !strings.HasSuffix(got, ", close reason: natural") {
		t.Errorf("closed: %q", got)
	}
	if got := (*SceneState)(nil).String(); got != "none" {
		t.Errorf("nil: %q", got)
	}
}
