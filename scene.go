package agentbridge

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Event types of scene mode (contract 5.8).
const (
	// TypeThinking is an actor's private reasoning, posted to itself.
	TypeThinking = "thinking"
	// TypeJournal is an actor's journal entry after a scene, private to it.
	TypeJournal = "journal"
	// TypeSceneClosed ends a scene; its content is the close reason.
	TypeSceneClosed = "scene.closed"
)

// Scene statuses. A scene is running until a close is decided, closing
// until the coordinator's scene.closed event is in the log, then closed.
const (
	SceneRunning = "running"
	SceneClosing = "closing"
	SceneClosed  = "closed"
)

// Close reasons, the content of a scene.closed event.
const (
	CloseNatural  = "natural"
	CloseExplicit = "explicit"
	CloseSoftCap  = "soft-cap"
	CloseHardCap  = "hard-cap"
	CloseError    = "error"
)

// Scene steps an actor's invocation can be (ScenePayload.Step).
const (
	SceneStepTurn    = "turn"
	SceneStepJournal = "journal"
)

// closeReasons are the contents a scene.closed event may have.
var closeReasons = []string{CloseNatural, CloseExplicit, CloseSoftCap, CloseHardCap, CloseError}

// MaxSceneCap bounds soft_cap and hard_cap: a scene runs one adapter
// invocation per turn, and a cap beyond this many turns per actor is no
// cap a scene can reach in practice (contract 6.3 refuses it).
const MaxSceneCap = 1000

// Default caps of a scene, per actor (seed 000: 40 turns each, 60 at most).
const (
	DefaultSoftCap = 40
	DefaultHardCap = 60
)

// SceneEndMarker is the speech an actor gives to end the scene explicitly.
const SceneEndMarker = "*[the scene ends here]*"

// The coordinator's fixed prompts (seed 000). They nudge timing and form,
// never content.
const (
	CorrectionPrompt = "Your last response did not use `<thinking>` and `<speech>` tags. Please reformat without changing the content."
	SoftCapPrompt    = "You sense the natural end of this conversation approaching. Bring it to a close in your own way over the next 2–3 turns."
	JournalPrompt    = "The scene has ended. Step partly back — not out of the character, but into reflective mode. Write a brief journal entry (200–500 words) in the character's first-person voice about what happened in the scene, what surprised them, what they're left thinking, what they might do or feel differently next time. This will become part of the character's memory for the next scene they're in."
)

// MetaPrivate is the meta key marking an event as private to its sender:
// no other participant's payload or transcript carries it.
const MetaPrivate = "private"

// MetaScene is the meta key of scene speech ({"turn": n, "corrected"?})
// and of the coordinator's error notice that closes a scene
// ({"close": "error"}).
const MetaScene = "scene"

// SceneControl is {"scene":{"on":true,"actors":[..],"setting","briefs",
// "first","soft_cap","hard_cap"}} or {"scene":{"on":false}}. Defaults are
// applied by ParseControl: First is the first actor, caps 40 and 60.
type SceneControl struct {
	On      bool              `json:"on"`
	Actors  []string          `json:"actors,omitempty"`
	Setting string            `json:"setting,omitempty"`
	Briefs  map[string]string `json:"briefs,omitempty"`
	First   string            `json:"first,omitempty"`
	SoftCap int               `json:"soft_cap,omitempty"`
	HardCap int               `json:"hard_cap,omitempty"`
}

// SceneState is a thread's scene as folded from its log. It is a value
// shared between states: Fold replaces it rather than changing it.
type SceneState struct {
	// On is true while the scene runs (Status running).
	On      bool              `json:"on"`
	Status  string            `json:"status"`
	Actors  []string          `json:"actors"`
	Setting string            `json:"setting"`
	Briefs  map[string]string `json:"briefs"`
	First   string            `json:"first"`
	SoftCap int               `json:"soft_cap"`
	HardCap int               `json:"hard_cap"`
	// Turns counts each actor's speeches; Turn is their sum.
	Turns map[string]int `json:"turns"`
	Turn  int            `json:"turn"`
	// Next is the actor whose speech is awaited.
	Next string `json:"next"`
	// CloseAfter, when set, is the actor whose next speech closes the
	// scene naturally (another actor said a closing line).
	CloseAfter  string `json:"close_after,omitempty"`
	CloseReason string `json:"close_reason,omitempty"`
	// Corrections counts speeches that needed the correction prompt.
	Corrections int `json:"corrections"`
	// StartID and StartSeq name the control that started the scene,
	// StartedAt its ts; ClosedAt is the scene.closed event's ts.
	StartID   string `json:"start_id"`
	StartSeq  int64  `json:"start_seq"`
	StartedAt string `json:"started_at"`
	ClosedAt  string `json:"closed_at,omitempty"`
}

// Running reports whether sc is a scene in progress (nil is not).
func (sc *SceneState) Running() bool { return sc != nil && sc.Status == SceneRunning }

// HasActor reports whether id plays in sc.
func (sc *SceneState) HasActor(id string) bool { return sc != nil && slices.Contains(sc.Actors, id) }

// NextAfter returns the actor who speaks after id, in actors order.
func (sc *SceneState) NextAfter(id string) string { return sc.after(id) }

// after returns the actor who speaks after id, in actors order.
func (sc *SceneState) after(id string) string {
	i := slices.Index(sc.Actors, id)
	return sc.Actors[(i+1)%len(sc.Actors)]
}

func (sc *SceneState) clone() *SceneState {
	n := *sc
	n.Turns = maps.Clone(sc.Turns)
	return &n
}

// closeWith marks the scene as closing; a close that ends a scene after the
// soft-cap nudge is reported as soft-cap, as seed 000 does.
func (sc *SceneState) closeWith(reason string) {
	if reason == CloseNatural || reason == CloseExplicit {
		for _, n := range sc.Turns {
			if n >= sc.SoftCap {
				reason = CloseSoftCap
				break
			}
		}
	}
	sc.On, sc.Status, sc.CloseReason, sc.CloseAfter = false, SceneClosing, reason, ""
}

// SceneMeta is the meta.scene object of a scene event.
type SceneMeta struct {
	// Turn is the speech's number in the scene, from 1.
	Turn int `json:"turn,omitempty"`
	// Corrected marks a speech that came after the correction prompt.
	Corrected bool `json:"corrected,omitempty"`
	// Close is set on the coordinator's notice that closes the scene
	// (CloseError).
	Close string `json:"close,omitempty"`
}

// SceneMetaOf returns e's meta.scene and whether it has a valid one.
func SceneMetaOf(e Event) (SceneMeta, bool) {
	raw, ok := e.Meta.Extra[MetaScene]
	if !ok {
		return SceneMeta{}, false
	}
	var m SceneMeta
	if err := json.Unmarshal(raw, &m); err != nil {
		return SceneMeta{}, false
	}
	return m, true
}

// IsPrivate reports whether e is private to its sender (meta.private).
func IsPrivate(e Event) bool {
	raw, ok := e.Meta.Extra[MetaPrivate]
	return ok && strings.TrimSpace(string(raw)) == "true"
}

// VisibleTo returns the events participant may see: everything but other
// participants' private events. It never modifies events.
func VisibleTo(events []Event, participant string) []Event {
	out := make([]Event, 0, len(events))
	for _, e := range events {
		if IsPrivate(e) && e.From != participant {
			continue
		}
		out = append(out, e)
	}
	return out
}

// foldScene returns the scene after e (sc itself when e does not change
// it); c is what counts of e's control (Control.CountedFrom). A human's
// scene control starts or closes it; an actor's speech
// (a message with meta.scene.turn) counts a turn and may close it; the
// coordinator's error notice and scene.closed end it.
func foldScene(sc *SceneState, e Event, c *Control) *SceneState {
	switch e.Type {
	case TypeControl:
		if c == nil || c.Scene == nil {
			return sc
		}
		return foldSceneControl(sc, c.Scene, e)
	case TypeMessage:
		return foldSceneMessage(sc, e)
	case TypeSceneClosed:
		if sc == nil || sc.Status == SceneClosed {
			return sc
		}
		n := sc.clone()
		n.On, n.Status, n.CloseAfter, n.ClosedAt = false, SceneClosed, "", e.TS
		if n.CloseReason == "" {
			n.CloseReason = e.Text()
		}
		return n
	}
	return sc
}

// foldSceneControl applies a human's scene control c (event e): it starts a
// scene unless one runs, or closes the running one.
func foldSceneControl(sc *SceneState, c *SceneControl, e Event) *SceneState {
	if c.On {
		if sc.Running() {
			return sc
		}
		return newScene(c, e)
	}
	if !sc.Running() {
		return sc
	}
	n := sc.clone()
	n.closeWith(CloseExplicit)
	return n
}

// foldSceneMessage applies a message to a running scene: the coordinator's
// error notice closes it; an actor's speech counts a turn and may close it.
func foldSceneMessage(sc *SceneState, e Event) *SceneState {
	if !sc.Running() {
		return sc
	}
	m, ok := SceneMetaOf(e)
	if !ok {
		return sc
	}
	if m.Close == CloseError && !sc.HasActor(e.From) {
		n := sc.clone()
		n.closeWith(CloseError)
		return n
	}
	if m.Turn == 0 || !sc.HasActor(e.From) {
		return sc
	}
	n := sc.clone()
	n.Turn++
	n.Turns[e.From]++
	n.Next = n.after(e.From)
	if m.Corrected {
		n.Corrections++
	}
	text := e.Text()
	switch {
	case IsSceneEnd(text):
		n.closeWith(CloseExplicit)
	case n.CloseAfter == e.From:
		n.closeWith(CloseNatural)
	case n.Turns[e.From] >= n.HardCap:
		n.closeWith(CloseHardCap)
	case n.CloseAfter == "" && IsClosingLine(text):
		n.CloseAfter = n.Next
	}
	return n
}

func newScene(c *SceneControl, e Event) *SceneState {
	turns := make(map[string]int, len(c.Actors))
	for _, a := range c.Actors {
		turns[a] = 0
	}
	briefs := maps.Clone(c.Briefs)
	if briefs == nil {
		briefs = map[string]string{}
	}
	return &SceneState{
		On: true, Status: SceneRunning,
		Actors: slices.Clone(c.Actors), Setting: c.Setting, Briefs: briefs,
		First: c.First, SoftCap: c.SoftCap, HardCap: c.HardCap,
		Turns: turns, Next: c.First,
		StartID: e.ID, StartSeq: e.Seq, StartedAt: e.TS,
	}
}

// sceneRaw is a scene control's value as decoded, before its rules.
type sceneRaw struct {
	On      *bool             `json:"on"`
	Actors  []string          `json:"actors"`
	Setting *string           `json:"setting"`
	Briefs  map[string]string `json:"briefs"`
	First   *string           `json:"first"`
	SoftCap *int              `json:"soft_cap"`
	HardCap *int              `json:"hard_cap"`
}

// badScene is invalid_control on content.scene, or on its sub-key key.
func badScene(key, msg string, args ...any) error {
	if key != "" {
		key = "." + key
	}
	return badControl("scene"+key, msg, args...)
}

// parseSceneControl parses the value of a "scene" control key. Every
// refusal is invalid_control naming the sub-key at fault.
func parseSceneControl(v json.RawMessage) (*SceneControl, error) {
	var raw sceneRaw
	if err := json.Unmarshal(v, &raw); err != nil || isNull(v) {
		return nil, badScene("", "A scene control needs {\"on\": true, \"actors\": [ids], ...} or {\"on\": false}; its keys have the wrong types: %s.", jsonErrTextOf(err))
	}
	if raw.On == nil {
		return nil, badScene("on", "A scene control needs \"on\": true to start a scene or false to close it.")
	}
	if !*raw.On {
		return &SceneControl{On: false}, nil
	}
	c := &SceneControl{On: true, Briefs: raw.Briefs, Setting: deref(raw.Setting)}
	var err error
	if c.Actors, err = sceneActors(raw.Actors); err != nil {
		return nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(raw.Briefs)) {
		if !slices.Contains(c.Actors, k) {
			return nil, badScene("briefs", "There is a brief for %q, who is not one of the scene's actors.", Clip(k, QuoteRunes))
		}
	}
	c.First = c.Actors[0]
	if raw.First != nil {
		if !slices.Contains(c.Actors, *raw.First) {
			return nil, badScene("first", "\"first\" must be one of the actors (%s), not %q.", strings.Join(c.Actors, ", "), Clip(*raw.First, QuoteRunes))
		}
		c.First = *raw.First
	}
	if c.SoftCap, c.HardCap, err = sceneCaps(raw); err != nil {
		return nil, err
	}
	return c, nil
}

// sceneActors checks a scene's actors: at least two valid ids, each once.
func sceneActors(actors []string) ([]string, error) {
	if len(actors) < 2 {
		return nil, badScene("actors", "A scene needs at least two actors, such as \"actors\": [\"maria\", \"sam\"].")
	}
	for i, a := range actors {
		if !ParticipantIDPattern.MatchString(a) {
			return nil, badScene("actors", "The actor id %q is not a valid participant id.", Clip(a, QuoteRunes))
		}
		if slices.Contains(actors[:i], a) {
			return nil, badScene("actors", "The actor %q is listed twice; each actor plays once.", a)
		}
	}
	return actors, nil
}

// sceneCaps returns a scene's soft and hard caps, the defaults where
// absent: each from 1 to MaxSceneCap, soft not above hard.
func sceneCaps(raw sceneRaw) (soft, hard int, err error) {
	soft, hard = DefaultSoftCap, DefaultHardCap
	if raw.SoftCap != nil {
		if *raw.SoftCap <= 0 || *raw.SoftCap > MaxSceneCap {
			return 0, 0, badScene("soft_cap", "\"soft_cap\" must be a number of turns per actor from 1 to %d, not %d.", MaxSceneCap, *raw.SoftCap)
		}
		soft = *raw.SoftCap
	}
	if raw.HardCap != nil {
		if *raw.HardCap <= 0 || *raw.HardCap > MaxSceneCap {
			return 0, 0, badScene("hard_cap", "\"hard_cap\" must be a number of turns per actor from 1 to %d, not %d.", MaxSceneCap, *raw.HardCap)
		}
		hard = *raw.HardCap
	}
	if soft > hard {
		key := "soft_cap"
		if raw.HardCap != nil && raw.SoftCap == nil {
			key = "hard_cap"
		}
		return 0, 0, badScene(key, "\"soft_cap\" (%d) must not be greater than \"hard_cap\" (%d).", soft, hard)
	}
	return soft, hard, nil
}

func jsonErrTextOf(err error) string {
	if err == nil {
		return "null"
	}
	return jsonErrText(err)
}

// checkSceneControl is the part of a scene control's validation that needs
// the thread: every actor must be invited, and a scene cannot start while
// another one runs. It returns nil for anything that is not a scene
// control (c nil or without a scene); Admit calls it with the state before
// the control.
func checkSceneControl(s ThreadState, c *Control) error {
	if c == nil || c.Scene == nil || !c.Scene.On {
		return nil
	}
	for _, a := range c.Scene.Actors {
		if _, ok := s.Invited(a); !ok {
			return FieldErrorf(ECodeInvalidControl, "content.scene.actors", "The actor %q is not invited in this thread; invite it (with a character) before starting the scene.", a)
		}
	}
	if s.Scene.Running() {
		return FieldErrorf(ECodeInvalidControl, "content.scene", "A scene is already running in this thread; close it with {\"scene\":{\"on\":false}} first.")
	}
	return nil
}

// closingLines are the phrases that close a scene naturally. The list is
// short and conservative on purpose (docs/scenes.md): a scene cut short is
// worse than one that runs a turn longer, and the caps bound it anyway.
var closingLines = []string{
	"thank you both",
	"i'll let you go",
	"i will let you go",
	"i should let you get on with your day",
	"i should head out",
	"i should get going",
	"safe travels",
}

// exitDirections are stage-direction phrases that mean a character leaves.
var exitDirections = []string{
	"leaves the room", "leaves the kitchen", "walks out", "heads out", "exits", "stands to leave",
	"puts on her coat", "puts on his coat", "puts on their coat", "closes the door behind",
}

// IsClosingLine reports whether a speech holds a closing phrase, or a stage
// direction (*[...]*) in which the character leaves.
func IsClosingLine(speech string) bool {
	s := normalizeSpeech(speech)
	for _, p := range closingLines {
		if strings.Contains(s, p) {
			return true
		}
	}
	for rest := s; ; {
		i := strings.Index(rest, "*[")
		if i < 0 {
			return false
		}
		rest = rest[i+2:]
		j := strings.Index(rest, "]*")
		if j < 0 {
			return false
		}
		dir := rest[:j]
		for _, p := range exitDirections {
			if strings.Contains(dir, p) {
				return true
			}
		}
		rest = rest[j+2:]
	}
}

// IsSceneEnd reports whether a speech is the explicit end marker.
func IsSceneEnd(speech string) bool {
	return strings.Contains(normalizeSpeech(speech), SceneEndMarker)
}

func normalizeSpeech(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "’", "'"))
}

// ParseSceneOutput splits an actor's output into its <thinking> and
// <speech> parts. ok is false unless both tags are present, in that order,
// and the speech is not empty.
func ParseSceneOutput(out string) (thinking, speech string, ok bool) {
	thinking, rest, ok := cutTag(out, "thinking")
	if !ok {
		return "", "", false
	}
	speech, _, ok = cutTag(rest, "speech")
	if !ok || speech == "" {
		return "", "", false
	}
	return thinking, speech, true
}

// cutTag returns the trimmed text inside the first <tag>…</tag> of s and
// what follows it.
func cutTag(s, tag string) (inner, rest string, ok bool) {
	open, closing := "<"+tag+">", "</"+tag+">"
	i := strings.Index(s, open)
	if i < 0 {
		return "", "", false
	}
	s = s[i+len(open):]
	j := strings.Index(s, closing)
	if j < 0 {
		return "", "", false
	}
	return strings.TrimSpace(s[:j]), s[j+len(closing):], true
}

// SceneStep says what an actor's invocation for a trigger is in its scene:
// a turn (its next speech) or its journal entry after the close.
type SceneStep struct {
	Step string
	// Turn is the number the speech will have (Step turn), or the actor's
	// turn count (Step journal).
	Turn int
	// Nudge is the soft-cap prompt once the actor has spoken SoftCap
	// times, and the journal prompt for the journal step.
	Nudge string
	Scene *SceneState
}

// SceneStepFor decides, from the thread's state just after trigger, whether
// participant's invocation for trigger is a scene step, and which. It is
// pure, so a recovered invocation is given exactly the step it had.
func SceneStepFor(s ThreadState, trigger Event, participant string) (SceneStep, bool) {
	sc := s.Scene
	if !sc.HasActor(participant) {
		return SceneStep{}, false
	}
	if trigger.Type == TypeSceneClosed {
		return SceneStep{Step: SceneStepJournal, Turn: sc.Turns[participant], Nudge: JournalPrompt, Scene: sc}, true
	}
	if !sc.Running() {
		return SceneStep{}, false
	}
	st := SceneStep{Step: SceneStepTurn, Turn: sc.Turn + 1, Scene: sc}
	if sc.Turns[participant] >= sc.SoftCap {
		st.Nudge = SoftCapPrompt
	}
	return st, true
}

// SceneClosedBy returns the close reason when e moved the scene from
// running to closing (before is the state before e, after the state after),
// so that exactly one scene.closed follows each close.
func SceneClosedBy(before, after ThreadState) (string, bool) {
	if before.Scene.Running() && after.Scene != nil && after.Scene.Status == SceneClosing {
		return after.Scene.CloseReason, true
	}
	return "", false
}

// SceneStarted reports whether e started a scene (before → after).
func SceneStarted(before, after ThreadState) bool {
	return !before.Scene.Running() && after.Scene.Running() && after.Scene != before.Scene
}

// String renders a scene's state for logs and the CLI.
func (sc *SceneState) String() string {
	if sc == nil {
		return "none"
	}
	parts := make([]string, len(sc.Actors))
	for i, a := range sc.Actors {
		parts[i] = fmt.Sprintf("%s %d", a, sc.Turns[a])
	}
	s := fmt.Sprintf("%s, turns: %s (soft cap %d, hard cap %d)", sc.Status, strings.Join(parts, ", "), sc.SoftCap, sc.HardCap)
	if sc.Running() && sc.Next != "" {
		s += ", next: " + sc.Next
	}
	if sc.CloseReason != "" {
		s += ", close reason: " + sc.CloseReason
	}
	return s
}
