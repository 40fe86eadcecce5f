package agentbridge

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// Mute modes.
const (
	MuteHard = "hard"
	MuteSoft = "soft"
)

// Control is a parsed control event. A control may carry several known keys
// at once; unknown keys are kept in the stored event but ignored here.
type Control struct {
	Invite      *InviteControl
	Uninvite    *UninviteControl
	Mute        *MuteControl
	Unmute      *UnmuteControl
	Pause       *Toggle
	Discussion  *DiscussionControl
	InvitedAuto *Toggle
	// Prod names participants to invoke once (nil when absent).
	Prod []string
	// Party switches party mode (contract 5.7).
	Party *PartyControl
	// Scene starts or closes a scene (see SceneControl).
	Scene *SceneControl
	// Cancel stops a participant's queued and running invocations in the
	// thread (contract 5.4); it leaves the fold's state as it is.
	Cancel *CancelControl
	// ResetSession makes the coordinator forget a participant's CLI
	// sessions in the thread (contract 5.6); any participant may send it,
	// and it leaves the fold's state as it is.
	ResetSession *ResetSessionControl
	// Permission answers an ACP agent's permission request (contract
	// 6.6); it leaves the fold's state as it is.
	Permission *PermissionControl
	// Workspace picks the workspace the thread's agents work in (contract
	// 8.1); a person's only.
	Workspace *WorkspaceControl
	// Change merges or discards a participant's branch (contract 8.1); a
	// person's only, and it leaves the fold's state as it is.
	Change *ChangeControl
	// Schedule sets or removes a schedule of the thread (contract 8.6);
	// the bridge keeps it apart from the fold's state.
	Schedule *ScheduleControl
	// Answer answers a question with fields (contract 8.4,
	// question.go); it leaves the fold's state as it is.
	Answer *AnswerControl
}

// PermissionControl is {"permission":{"event","option"}}: the answer to
// the permission request posted as event, choosing the option with that
// id.
type PermissionControl struct {
	Event  string `json:"event"`
	Option string `json:"option"`
}

// ResetSessionControl is {"reset_session":{"participant_id"}}.
type ResetSessionControl struct {
	ParticipantID string `json:"participant_id"`
}

// CancelControl is {"cancel":{"participant_id"}}.
type CancelControl struct {
	ParticipantID string `json:"participant_id"`
}

// InviteControl is {"invite":{"participant_id","profile"}}.
type InviteControl struct {
	ParticipantID string  `json:"participant_id"`
	Profile       Profile `json:"profile"`
}

// UninviteControl is {"uninvite":{"participant_id"}}.
type UninviteControl struct {
	ParticipantID string `json:"participant_id"`
}

// MuteControl is {"mute":{"targets":[..],"mode":"hard"}}.
type MuteControl struct {
	Targets []string `json:"targets"`
	Mode    string   `json:"mode"`
}

// UnmuteControl is {"unmute":{"targets":[..]}}.
type UnmuteControl struct {
	Targets []string `json:"targets"`
}

// DiscussionControl is {"discussion":{"on":bool,"allow_agent_mentions":bool}};
// AllowAgentMentions defaults to On when absent.
type DiscussionControl struct {
	On                 bool
	AllowAgentMentions *bool
}

// controlParser parses the value v of one control key into c. A value of
// the wrong shape is an *Error with code invalid_control naming the key.
type controlParser func(c *Control, v json.RawMessage) error

// controlParsers is every control key the product acts on, with its
// parser: the one list of known keys (ControlKeys is made from it).
// "permission", the answer to an ACP agent's permission request (contract
// 6.6), is acted on by the coordinator.
var controlParsers = map[string]controlParser{
	"answer":        parseAnswer,
	"cancel":        parseCancel,
	"change":        parseChange,
	"discussion":    parseDiscussion,
	"invite":        parseInvite,
	"invited_auto":  parseInvitedAuto,
	"mute":          parseMute,
	"party":         parsePartyKey,
	"pause":         parsePause,
	"permission":    parsePermission,
	"prod":          parseProd,
	"reset_session": parseResetSession,
	"scene":         parseScene,
	"schedule":      parseSchedule,
	"uninvite":      parseUninvite,
	"unmute":        parseUnmute,
	"workspace":     parseWorkspace,
}

// ControlKeys are the control keys the product acts on, sorted: the keys
// of the parser table. A control holding none of them does nothing
// anywhere, so the bridge refuses it (contract 6.3); unknown keys next to
// a known one are kept, as v0 kept them.
var ControlKeys = slices.Sorted(maps.Keys(controlParsers))

// ParseControl parses control content: a JSON object, or a JSON string
// holding one (the original UI sends that). A known key with the wrong shape
// is an *Error with code invalid_control naming the key.
func ParseControl(content json.RawMessage) (Control, error) {
	obj, err := controlObject(content)
	if err != nil {
		return Control{}, err
	}
	return parseKeys(obj)
}

// ControlOf parses e's control: nil when e is not a control or its content
// does not parse, as a stored event may not (the log holds what older
// bridges accepted). It is for events read back; an appended control is
// parsed by AppendRequest.Validate and handed on.
func ControlOf(e Event) *Control {
	if e.Type != TypeControl {
		return nil
	}
	c, err := ParseControl(e.Content)
	if err != nil {
		return nil
	}
	return &c
}

// controlParses counts the parses of control content in this process, for
// ControlParses.
var controlParses atomic.Int64

// ControlParses is how many times this process has parsed a control's
// content. The bridge exports it as agent_bridge_control_parses_total, and
// tests read it to hold the rule that a control is parsed once on its path
// through each daemon.
func ControlParses() int64 { return controlParses.Load() }

// checkControl is ParseControl for an event a client appends: it also
// refuses content that holds no known key (contract 6.3).
func checkControl(content json.RawMessage) (Control, error) {
	obj, err := controlObject(content)
	if err != nil {
		return Control{}, err
	}
	if err := checkStringControlKeys(content); err != nil {
		return Control{}, err
	}
	c, err := parseKeys(obj)
	if err != nil {
		return Control{}, err
	}
	return c, needKnownKey(obj)
}

// controlObject decodes control content into its keys and their values.
func controlObject(content json.RawMessage) (map[string]json.RawMessage, error) {
	content = bytes.TrimSpace(content)
	if len(content) > 0 && content[0] == '"' {
		var s string
		if err := json.Unmarshal(content, &s); err != nil {
			return nil, FieldErrorf(ECodeInvalidControl, "content", "A control's content must be a JSON object.")
		}
		content = json.RawMessage(s)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(content, &obj); err != nil || obj == nil {
		return nil, FieldErrorf(ECodeInvalidControl, "content", "A control's content must be a JSON object, such as {\"pause\":{\"on\":true}}.")
	}
	return obj, nil
}

// checkStringControlKeys refuses control content sent as a JSON string
// (as the original UI does) whose object holds a key twice: the body's own
// check (CheckJSONBody) sees only a string there.
func checkStringControlKeys(content json.RawMessage) error {
	content = bytes.TrimSpace(content)
	if len(content) == 0 || content[0] != '"' {
		return nil
	}
	var s string
	if json.Unmarshal(content, &s) != nil {
		return nil
	}
	return CheckDuplicateKeys([]byte(s), "content")
}

// parseKeys runs the parser of every known key of obj, in key order, so
// that content with several malformed keys always gets the same error: map
// order would pick one at random.
func parseKeys(obj map[string]json.RawMessage) (Control, error) {
	controlParses.Add(1)
	var c Control
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		parse, ok := controlParsers[key]
		if !ok {
			continue
		}
		if err := parse(&c, obj[key]); err != nil {
			return Control{}, err
		}
	}
	return c, nil
}

// needKnownKey refuses a control object that holds no key of ControlKeys.
func needKnownKey(obj map[string]json.RawMessage) error {
	for k := range obj {
		if _, ok := controlParsers[k]; ok {
			return nil
		}
	}
	keys := slices.Sorted(maps.Keys(obj))
	for i, k := range keys {
		keys[i] = strconv.Quote(Clip(k, QuoteRunes))
	}
	got := "no key"
	if len(keys) > 0 {
		got = "only " + strings.Join(keys, ", ")
	}
	return FieldErrorf(ECodeInvalidControl, "content",
		"This control has %s, which nothing acts on; a control needs one of %s.", got, strings.Join(ControlKeys, ", "))
}

// badControl is the error for the value of key: invalid_control on
// content.<key>.
func badControl(key, msg string, args ...any) error {
	return FieldErrorf(ECodeInvalidControl, "content."+key, msg, args...)
}

// participantIDOf decodes {"participant_id": id}; ok is false unless the
// id is there and valid.
func participantIDOf(v json.RawMessage) (id string, ok bool) {
	var raw struct {
		ParticipantID *string `json:"participant_id"`
	}
	if json.Unmarshal(v, &raw) != nil || raw.ParticipantID == nil || !ParticipantIDPattern.MatchString(*raw.ParticipantID) {
		return "", false
	}
	return *raw.ParticipantID, true
}

// parseParticipant parses the value of key, {"participant_id": id}, and
// hands the id to set; an absent or invalid id is refused, in a sentence
// that starts with article.
func parseParticipant(v json.RawMessage, key, article string, set func(id string)) error {
	id, ok := participantIDOf(v)
	if !ok {
		return badControl(key, "%s %s needs {\"participant_id\": ...} with a valid participant id.", article, key)
	}
	set(id)
	return nil
}

func parseUninvite(c *Control, v json.RawMessage) error {
	return parseParticipant(v, "uninvite", "An", func(id string) { c.Uninvite = &UninviteControl{ParticipantID: id} })
}

func parseCancel(c *Control, v json.RawMessage) error {
	return parseParticipant(v, "cancel", "A", func(id string) { c.Cancel = &CancelControl{ParticipantID: id} })
}

func parseResetSession(c *Control, v json.RawMessage) error {
	return parseParticipant(v, "reset_session", "A", func(id string) { c.ResetSession = &ResetSessionControl{ParticipantID: id} })
}

func parseInvite(c *Control, v json.RawMessage) error {
	var raw struct {
		ParticipantID *string         `json:"participant_id"`
		Profile       json.RawMessage `json:"profile"`
	}
	if err := json.Unmarshal(v, &raw); err != nil || raw.ParticipantID == nil {
		return badControl("invite", "An invite needs {\"participant_id\": ..., \"profile\": {\"client\": ..., \"model\": ...}}.")
	}
	if !ParticipantIDPattern.MatchString(*raw.ParticipantID) {
		return badControl("invite", "The invited participant id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", Clip(*raw.ParticipantID, QuoteRunes))
	}
	p, err := parseProfile(raw.Profile)
	if err != nil {
		return err
	}
	c.Invite = &InviteControl{ParticipantID: *raw.ParticipantID, Profile: p}
	return nil
}

// parseProfile parses an invite's profile: client and model required,
// roles, nickname, expertise and character optional.
func parseProfile(v json.RawMessage) (Profile, error) {
	var p struct {
		Client   *string  `json:"client"`
		Model    *string  `json:"model"`
		Roles    []string `json:"roles"`
		Nickname *string  `json:"nickname"`
		// Expertise is decoded separately so that a wrong type gets its
		// own sentence.
		Expertise json.RawMessage `json:"expertise"`
		Character *string         `json:"character"`
		Workspace *string         `json:"workspace"`
	}
	if len(v) == 0 || json.Unmarshal(v, &p) != nil || isNull(v) {
		return Profile{}, badControl("invite", "An invite needs a profile object with client and model.")
	}
	if p.Client == nil || *p.Client == "" {
		return Profile{}, badControl("invite", "An invite's profile needs a client (such as \"claude\" or \"codex\").")
	}
	if p.Model == nil || *p.Model == "" {
		return Profile{}, badControl("invite", "An invite's profile needs a model.")
	}
	if p.Workspace != nil && *p.Workspace != "" && !WorkspaceNamePattern.MatchString(*p.Workspace) {
		return Profile{}, badControl("invite", "An invite's profile workspace must be a workspace name from a coordinator's config (letters, digits, . _ -), never a path, not %q.", Clip(*p.Workspace, QuoteRunes))
	}
	out := Profile{Client: *p.Client, Model: *p.Model, Roles: p.Roles, Nickname: deref(p.Nickname), Character: deref(p.Character), Workspace: deref(p.Workspace)}
	if len(p.Expertise) > 0 && !isNull(p.Expertise) {
		if json.Unmarshal(p.Expertise, &out.Expertise) != nil {
			return Profile{}, badControl("invite", "An invite's profile expertise must be a list of strings, such as [\"databases\", \"security\"].")
		}
	}
	return out, nil
}

// deref is *s, or "" for nil.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func parseMute(c *Control, v json.RawMessage) error {
	var raw struct {
		Targets []string `json:"targets"`
		Mode    *string  `json:"mode"`
	}
	if err := json.Unmarshal(v, &raw); err != nil || len(raw.Targets) == 0 || !validIDs(raw.Targets) {
		return badControl("mute", "A mute needs {\"targets\": [participant ids], \"mode\": \"hard\"}.")
	}
	m := &MuteControl{Targets: raw.Targets, Mode: MuteHard}
	if raw.Mode != nil {
		if *raw.Mode != MuteHard && *raw.Mode != MuteSoft {
			return badControl("mute", "A mute's mode must be \"hard\" or \"soft\", not %q.", Clip(*raw.Mode, QuoteRunes))
		}
		m.Mode = *raw.Mode
	}
	c.Mute = m
	return nil
}

func parseUnmute(c *Control, v json.RawMessage) error {
	var raw struct {
		Targets []string `json:"targets"`
	}
	if err := json.Unmarshal(v, &raw); err != nil || len(raw.Targets) == 0 || !validIDs(raw.Targets) {
		return badControl("unmute", "An unmute needs {\"targets\": [participant ids]}.")
	}
	c.Unmute = &UnmuteControl{Targets: raw.Targets}
	return nil
}

// parseToggle parses {"on": bool}, the value of key.
func parseToggle(key string, v json.RawMessage) (*Toggle, error) {
	var raw struct {
		On *bool `json:"on"`
	}
	if err := json.Unmarshal(v, &raw); err != nil || raw.On == nil {
		return nil, badControl(key, "A %s control needs {\"on\": true} or {\"on\": false}.", key)
	}
	return &Toggle{On: *raw.On}, nil
}

func parsePause(c *Control, v json.RawMessage) (err error) {
	c.Pause, err = parseToggle("pause", v)
	return err
}

func parseInvitedAuto(c *Control, v json.RawMessage) (err error) {
	c.InvitedAuto, err = parseToggle("invited_auto", v)
	return err
}

func parseDiscussion(c *Control, v json.RawMessage) error {
	var raw struct {
		On                 *bool `json:"on"`
		AllowAgentMentions *bool `json:"allow_agent_mentions"`
	}
	if err := json.Unmarshal(v, &raw); err != nil || raw.On == nil {
		return badControl("discussion", "A discussion control needs {\"on\": bool} and optionally \"allow_agent_mentions\": bool.")
	}
	c.Discussion = &DiscussionControl{On: *raw.On, AllowAgentMentions: raw.AllowAgentMentions}
	return nil
}

func parseProd(c *Control, v json.RawMessage) error {
	var ids []string
	if err := json.Unmarshal(v, &ids); err != nil || len(ids) == 0 || !validIDs(ids) {
		return badControl("prod", "A prod needs a list of participant ids, such as {\"prod\": [\"codex\"]}.")
	}
	c.Prod = ids
	return nil
}

func parsePartyKey(c *Control, v json.RawMessage) (err error) {
	c.Party, err = parseParty(v)
	return err
}

func parseScene(c *Control, v json.RawMessage) (err error) {
	c.Scene, err = parseSceneControl(v)
	return err
}

func parsePermission(c *Control, v json.RawMessage) error {
	var raw struct {
		Event  *string `json:"event"`
		Option *string `json:"option"`
	}
	// Event ids are ULIDs, made of the characters of thread ids.
	if err := json.Unmarshal(v, &raw); err != nil || raw.Event == nil || raw.Option == nil ||
		!ThreadIDPattern.MatchString(*raw.Event) || *raw.Option == "" || len(*raw.Option) > 256 {
		return badControl("permission", "A permission answer needs {\"event\": <the permission request's event id>, \"option\": <one of its option ids>}.")
	}
	c.Permission = &PermissionControl{Event: *raw.Event, Option: *raw.Option}
	return nil
}

func validIDs(ids []string) bool {
	for _, id := range ids {
		if !ParticipantIDPattern.MatchString(id) {
			return false
		}
	}
	return true
}
