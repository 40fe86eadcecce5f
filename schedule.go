package agentbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MetaSchedule is the meta key of an event the bridge posted for a
// schedule (contract 8.6): {"id", "due"}, the schedule and the due time
// (RFC 3339, UTC) it was posted for.
const MetaSchedule = "schedule"

// ViaSchedule is meta.via of an event the bridge posted for a schedule.
const ViaSchedule = "schedule"

// ScheduleSender is who the bridge's note of a schedule's skipped due
// times is from.
const ScheduleSender = "bridge"

// ScheduleControl is {"schedule": {"id", "cron", "tz", "event"}}, which sets
// (or replaces) the thread's schedule id, or {"schedule": {"id", "off":
// true}}, which removes it. Cron and TZ are checked by the bridge, which
// knows the cron syntax: a bad one is stored but ignored.
type ScheduleControl struct {
	ID   string
	Cron string
	// TZ is the IANA zone the cron is read in ("UTC" when absent).
	TZ string
	// Event is what each due time posts (nil with Off).
	Event *ScheduleEvent
	Off   bool
}

// ScheduleEvent is the message a schedule posts as the person who set
// it: {"to", "content"}.
type ScheduleEvent struct {
	To      string          `json:"to,omitempty"`
	Content json.RawMessage `json:"content"`
}

// Schedule is a thread's schedule as the bridge keeps it: what its control
// set, who set it (the person it posts as) and the last due time handled.
type Schedule struct {
	Thread string        `json:"thread"`
	ID     string        `json:"id"`
	Cron   string        `json:"cron"`
	TZ     string        `json:"tz"`
	Event  ScheduleEvent `json:"event"`
	// From is the person who set it, whom its events are from.
	From string `json:"from"`
	// SetSeq is the seq of the control that set it: a claim names it, so
	// that a replaced schedule's due times are never posted.
	SetSeq int64 `json:"set_seq"`
	// SetAt is when it was set (the control's ts), the earliest due time
	// it posts after.
	SetAt string `json:"set_at"`
	// LastDue is the last due time handled, posted or skipped ("" when
	// none yet).
	LastDue string `json:"last_due,omitempty"`
	// Next is the next due time (filled by the bridge, which knows cron).
	Next string `json:"next,omitempty"`
}

// ScheduleClaim makes an append a schedule's post (or its notice of
// skipped due times): the store writes it only when the schedule is still
// the one set at SetSeq and its last handled due time is still Prev,
// and moves that to Due in the same transaction, so that of several
// bridges exactly one posts each due time.
type ScheduleClaim struct {
	ID     string
	SetSeq int64
	Prev   string
	Due    string
}

// ErrScheduleTaken is the refusal of a ScheduleClaim whose due time
// another bridge (or an earlier run) has handled, or whose schedule was
// replaced or removed meanwhile: nothing is stored.
var ErrScheduleTaken = errors.New("the schedule's due time was handled already, or the schedule changed")

// ScheduleStore keeps the thread's schedules (the rows their controls
// write, in the append's transaction) and the claims of their due times
// (AppendRequest.Schedule).
type ScheduleStore interface {
	// Schedules lists the schedules of thread ("" for every thread), by
	// thread then id.
	Schedules(ctx context.Context, thread string) ([]Schedule, error)
	// HandleScheduleDue moves the last handled due time of thread's
	// schedule as claim c's append would, storing no event: for a due
	// time whose post and notice the thread both refuse. It is
	// ErrScheduleTaken when the claim does not hold.
	HandleScheduleDue(ctx context.Context, thread string, c ScheduleClaim) error
}

// NoScheduleIgnored is the ignored note of a schedule turned off that
// the thread does not have.
func NoScheduleIgnored(id string) *Ignored {
	return &Ignored{Code: IgnoredNoSchedule, Reason: fmt.Sprintf("there is no schedule %q in this thread, so there is nothing to turn off", Clip(id, QuoteRunes))}
}

// maxCronLen and maxZoneLen bound a schedule's cron and zone.
const (
	maxCronLen = 128
	maxZoneLen = 64
)

func parseSchedule(c *Control, v json.RawMessage) error {
	var raw struct {
		ID    *string         `json:"id"`
		Cron  *string         `json:"cron"`
		TZ    *string         `json:"tz"`
		Event json.RawMessage `json:"event"`
		Off   *bool           `json:"off"`
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil || raw.ID == nil {
		return badControl("schedule", "A schedule needs {\"id\", \"cron\", \"tz\", \"event\": {\"to\", \"content\"}}, or {\"id\", \"off\": true} to remove it.")
	}
	if !ThreadIDPattern.MatchString(*raw.ID) {
		return badControl("schedule", "A schedule's id %q is not valid: use 1 to 64 letters, digits or . _ -, starting with a letter or digit.", Clip(*raw.ID, QuoteRunes))
	}
	sc := &ScheduleControl{ID: *raw.ID}
	if raw.Off != nil && *raw.Off {
		if raw.Cron != nil || raw.Event != nil {
			return badControl("schedule", "A schedule that is turned off takes only its id and \"off\": true.")
		}
		sc.Off = true
		c.Schedule = sc
		return nil
	}
	if raw.Cron == nil || *raw.Cron == "" || len(*raw.Cron) > maxCronLen {
		return badControl("schedule", "A schedule needs a cron of at most %d characters, such as \"0 9 * * 1-5\" or \"@daily\".", maxCronLen)
	}
	sc.Cron, sc.TZ = *raw.Cron, "UTC"
	if raw.TZ != nil {
		if *raw.TZ == "" || len(*raw.TZ) > maxZoneLen {
			return badControl("schedule", "A schedule's tz must be a time zone name such as \"Europe/Berlin\" (or left out for UTC).")
		}
		sc.TZ = *raw.TZ
	}
	ev, err := parseScheduleEvent(raw.Event)
	if err != nil {
		return err
	}
	sc.Event = ev
	c.Schedule = sc
	return nil
}

// parseScheduleEvent checks a schedule's event as the message it will
// post: a non-empty content, a valid recipient.
func parseScheduleEvent(v json.RawMessage) (*ScheduleEvent, error) {
	var ev ScheduleEvent
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if len(v) == 0 || isNull(v) || dec.Decode(&ev) != nil {
		return nil, badControl("schedule", "A schedule's event must be {\"to\": a participant id or \"all\", \"content\": the message}.")
	}
	if ev.To == "" {
		ev.To = ToAll
	}
	if !ParticipantIDPattern.MatchString(ev.To) {
		return nil, badControl("schedule", "A schedule's event.to %q is not a participant id (or \"all\").", Clip(ev.To, QuoteRunes))
	}
	// The message rule (EventInput.validate), which cannot be called from
	// a control's parser: content is a non-empty string.
	var text string
	if json.Unmarshal(ev.Content, &text) != nil || strings.TrimSpace(text) == "" {
		return nil, badControl("schedule", "A schedule's event.content must be the message's text, a non-empty string.")
	}
	return &ev, nil
}

// ScheduledInput is the event a schedule posts for due time due: its
// message, from the person who set it, with meta.via "schedule" and
// meta.schedule {"id", "due"}.
func ScheduledInput(s Schedule, due time.Time) EventInput {
	mark, _ := json.Marshal(struct {
		ID  string `json:"id"`
		Due string `json:"due"`
	}{s.ID, due.UTC().Format(time.RFC3339)})
	return EventInput{
		Type: TypeMessage, From: s.From, To: s.Event.To, Content: s.Event.Content,
		Meta: Meta{Via: ViaSchedule, Extra: map[string]json.RawMessage{MetaSchedule: mark}},
	}
}

// SkippedInput is the bridge's one notice that schedule s skipped n due
// times, from first to last, because the bridge was down past catchUp.
func SkippedInput(s Schedule, n int, first, last time.Time, catchUp time.Duration) EventInput {
	times := "the due time " + last.UTC().Format(time.RFC3339)
	if n > 1 {
		times = fmt.Sprintf("%d due times from %s to %s", n, first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339))
	}
	text := fmt.Sprintf("Schedule %q skipped %s: the bridge was not running then, and it posts a missed time only within %s of it (catch_up).", s.ID, times, catchUp)
	return scheduleNotice(s, text, struct {
		ID      string `json:"id"`
		Skipped int    `json:"skipped"`
		Last    string `json:"last"`
	}{s.ID, n, last.UTC().Format(time.RFC3339)})
}

// RefusedInput is the bridge's one notice that the thread refused
// schedule s's post for due time due, with the refusal's sentence: the
// due time counts as handled, and the next one is tried as usual.
func RefusedInput(s Schedule, due time.Time, refusal *Error) EventInput {
	text := fmt.Sprintf("Schedule %q could not post its message due at %s: %s It tries again at its next due time; {\"schedule\": {\"id\": %q, \"off\": true}} turns it off.",
		s.ID, due.UTC().Format(time.RFC3339), refusal.Message, s.ID)
	return scheduleNotice(s, text, struct {
		ID      string `json:"id"`
		Due     string `json:"due"`
		Refused string `json:"refused"`
	}{s.ID, due.UTC().Format(time.RFC3339), refusal.Code})
}

// scheduleNotice is the bridge's message text to the person who set s,
// tagged "schedule", with meta.schedule mark.
func scheduleNotice(s Schedule, text string, mark any) EventInput {
	content, _ := json.Marshal(text)
	raw, _ := json.Marshal(mark)
	return EventInput{
		Type: TypeMessage, From: ScheduleSender, To: s.From, Content: content,
		Meta: Meta{Via: ViaSchedule, Tags: []string{"schedule"}, Extra: map[string]json.RawMessage{MetaSchedule: raw}},
	}
}
