package storecore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/oklog/ulid/v2"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/schedule"
)

// AppendLookups are the facts an append's preamble asks of a store's
// writer, inside its transaction. Both drivers' "no row" errors are
// sql.ErrNoRows (pgx's wraps it), which Found turns into found=false.
type AppendLookups interface {
	// Replay looks up thread's idempotency key: found says an earlier
	// append stored ev under it (one written earlier in the same batch
	// included), which the store keeps to answer with when the append is
	// its retry.
	Replay(ctx context.Context, thread, key string) (ev agentbridge.Event, found bool, err error)
	// ReplayLegacy is Replay among the keys a release before scoped keys
	// stored (agentbridge.AppendRequest.LegacyIdempotencyKey), which a
	// migration copied apart (idempotency_legacy); found is false at once
	// when there were none.
	ReplayLegacy(ctx context.Context, thread, key string) (ev agentbridge.Event, found bool, err error)
	// ReplyTarget looks up the event meta.reply_to names in thread.
	ReplyTarget(ctx context.Context, thread, id string) (agentbridge.ReplyTarget, error)
	// Event looks up an event of thread by id (one written earlier in the
	// same batch included), for a permission answer, which names the
	// request it answers.
	Event(ctx context.Context, thread, id string) (e agentbridge.Event, found bool, err error)
	// SenderHopAfter is the highest hop of sender's messages in thread
	// after seq (found false when there are none), for agentbridge.HopFloor.
	SenderHopAfter(ctx context.Context, thread, sender string, seq int64) (hop int, found bool, err error)
	// FirstAnswer finds the first event of thread after target (one
	// written earlier in the same batch included) for which answers is
	// true. It reads only the events after target that name its id in
	// their content or meta.
	FirstAnswer(ctx context.Context, thread string, target agentbridge.Event, answers func(agentbridge.Event) bool) (e agentbridge.Event, found bool, err error)
	// Attachment looks up a stored attachment by id (its type, size and
	// first name). The PostgreSQL store locks the row until the commit,
	// so that no sweep removes it under the event that names it.
	Attachment(ctx context.Context, id string) (a agentbridge.Attachment, found bool, err error)
}

// Admission is what Preamble decided for an append.
type Admission struct {
	// Replayed says the idempotency key was seen with the same event: the
	// store answers with the event its Replay found and writes nothing. A
	// key seen with another event is a Refusal (idempotency_conflict).
	Replayed bool
	// Refusal is the client's error (an *agentbridge.Error): nothing is
	// written.
	Refusal error
	// Input is what to store: for a message, Meta.Hop is the hop the
	// bridge assigns.
	Input agentbridge.EventInput
	// Ignored is agentbridge.IgnoredEffect of the event on the state
	// before it, else its already_answered note, for AppendResult.Ignored.
	// A replay carries only the already_answered note its first append
	// had (replayAnswered); the bridge decides the rest (its state before
	// is not at hand here).
	Ignored *agentbridge.Ignored
	// Attachments are the ids the event names (meta.attachments and
	// meta.change.diff), all stored: the store links them to the event,
	// which makes its thread hold them and keeps them from the sweep.
	Attachments []string
	// MetaChanged says Input.Meta is not the request's: its attachments
	// were written as stored (agentbridge.NormalizeAttachments), so the
	// store encodes it again.
	MetaChanged bool
}

// Preamble runs an append's rules in their order, on a thread whose state
// before it is st (hasMessages: whether the thread holds a message yet):
// the idempotency key (a replay ends it, answered with the stored event
// only when it is the same append: agentbridge.CheckReplay), reply_to, agentbridge.Admit with
// the control AppendRequest.Validate parsed (ctl), and for a message the
// hop (agentbridge.AssignHop, raised to agentbridge.HopFloor). Every store runs it, so that all decide an
// append alike; err is the database failing, and fails the batch.
func Preamble(ctx context.Context, l AppendLookups, req agentbridge.AppendRequest, ctl *agentbridge.Control,
	st agentbridge.ThreadState, hasMessages bool, humans agentbridge.Humans) (Admission, error) {
	in, ids, refusal, err := admitAttachments(ctx, l, req.Thread, req.Input)
	if err != nil {
		return Admission{}, err
	}
	if refusal != nil {
		return Admission{Refusal: refusal}, nil
	}
	if req.IdempotencyKey != "" {
		stored, found, err := l.Replay(ctx, req.Thread, req.IdempotencyKey)
		if err == nil && !found && req.LegacyIdempotencyKey != "" {
			stored, found, err = l.ReplayLegacy(ctx, req.Thread, req.LegacyIdempotencyKey)
		}
		if err != nil {
			return Admission{}, fmt.Errorf("look up idempotency key: %w", err)
		}
		if found {
			if err := agentbridge.CheckReplay(req.Thread, req.IdempotencyKey, stored, in); err != nil {
				return Admission{Refusal: err}, nil
			}
			answered, err := replayAnswered(ctx, l, req.Thread, stored, ctl, humans)
			if err != nil {
				return Admission{}, err
			}
			return Admission{Replayed: true, Ignored: answered}, nil
		}
	}
	var reply agentbridge.ReplyTarget
	if in.Meta.ReplyTo != "" {
		var err error
		if reply, err = l.ReplyTarget(ctx, req.Thread, in.Meta.ReplyTo); err != nil {
			return Admission{}, fmt.Errorf("look up reply_to: %w", err)
		}
	}
	if err := agentbridge.Admit(req.Thread, st, in, ctl, reply, humans); err != nil {
		return Admission{Refusal: err}, nil
	}
	var answered *agentbridge.Ignored
	if target := answeredEvent(ctl); target != "" {
		e, found, err := l.Event(ctx, req.Thread, target)
		if err != nil {
			return Admission{}, fmt.Errorf("look up the request answered: %w", err)
		}
		if ctl.Permission != nil {
			err = agentbridge.CheckPermissionAnswer(*ctl.Permission, e, found)
		}
		if err == nil && ctl.Answer != nil {
			err = agentbridge.CheckQuestionAnswer(*ctl.Answer, e, found)
		}
		if err != nil {
			return Admission{Refusal: err}, nil
		}
		if answered, err = alreadyAnswered(ctx, l, req.Thread, in, e, humans); err != nil {
			return Admission{}, err
		}
	}
	if in.Type == agentbridge.TypeMessage && in.Meta.ReplyTo != "" && humans.Has(in.From) {
		e, _, err := l.Event(ctx, req.Thread, in.Meta.ReplyTo)
		if err != nil {
			return Admission{}, fmt.Errorf("look up reply_to: %w", err)
		}
		if agentbridge.IsQuestion(e) {
			if answered, err = alreadyAnswered(ctx, l, req.Thread, in, e, humans); err != nil {
				return Admission{}, err
			}
		}
	}
	if in.Type == agentbridge.TypeMessage {
		hop := agentbridge.AssignHop(st, in, reply, humans, hasMessages)
		if reply.Found && !humans.Has(in.From) {
			floor, found, err := l.SenderHopAfter(ctx, req.Thread, in.From, reply.Seq)
			if err != nil {
				return Admission{}, fmt.Errorf("look up the sender's hop: %w", err)
			}
			if found {
				hop = agentbridge.HopFloor(hop, floor)
			}
		}
		in.Meta.Hop = &hop
	}
	var ignored *agentbridge.Ignored
	if e := (agentbridge.Event{Type: in.Type, From: in.From, To: in.To, Content: in.Content}); agentbridge.NeedsIgnoredCheck(e, humans) {
		ignored = agentbridge.IgnoredEffect(st, e, ctl, humans)
	}
	if ignored == nil {
		ignored = answered
	}
	if ignored == nil && ctl != nil && ctl.Schedule != nil && humans.Has(in.From) {
		ignored = schedule.Check(ctl.Schedule)
	}
	return Admission{Input: in, Ignored: ignored, Attachments: ids, MetaChanged: len(ids) > 0}, nil
}

// AppendTx is a driver's writer inside its write transaction, as
// AppendEvent uses it: the order of an append's writes is AppendEvent's,
// and how an event and its thread's head are stored is the driver's.
type AppendTx interface {
	AppendLookups
	// Conn is the write transaction.
	Conn() Conn
	// CheckFence checks an append's fence against its claim, whose row
	// stays locked until COMMIT: a takeover waits for the append, or the
	// append sees the takeover. refusal is fenced.
	CheckFence(ctx context.Context, f agentbridge.ClaimFence) (refusal, err error)
	// Add gives ev the seq and a ts after its thread's last and an id,
	// stores it with meta, the stored form of its Meta, folds it (with
	// ctl, its parsed control) into the thread's head, and returns it as
	// stored. ev goes by value: a pointer through the interface would move
	// every append's event to the heap.
	Add(ctx context.Context, ev agentbridge.Event, meta string, ctl *agentbridge.Control) (agentbridge.Event, error)
	// RecordKey stores thread's idempotency key for the event Add stored
	// last, id.
	RecordKey(ctx context.Context, thread, key, id string) error
}

// AppendEvent is an append from top to bottom, in one driver's write
// transaction, on a thread whose state before it is st (hasMessages:
// whether it holds a message yet): Preamble's rules, then the writes in
// their order (the fence, the schedule's due time, the event, its
// attachments' links, the schedule it changes, its idempotency key). meta
// is the request's Meta in stored form (PrepareAppend), ctl its parsed
// control. When a says Replayed or Refusal, nothing is written; err is the
// database failing, and fails the batch.
func AppendEvent(ctx context.Context, tx AppendTx, req agentbridge.AppendRequest, meta string, ctl *agentbridge.Control,
	st agentbridge.ThreadState, hasMessages bool, humans agentbridge.Humans) (a Admission, ev agentbridge.Event, err error) {
	a, err = Preamble(ctx, tx, req, ctl, st, hasMessages, humans)
	if err != nil || a.Replayed || a.Refusal != nil {
		return a, ev, err
	}
	if req.Fence != nil {
		if a.Refusal, err = tx.CheckFence(ctx, *req.Fence); err != nil || a.Refusal != nil {
			return a, ev, err
		}
	}
	if req.Schedule != nil {
		// The claim is the last check and the first write: once it holds,
		// nothing refuses the append. Its row stays locked until COMMIT.
		if err := ClaimSchedule(ctx, req.Thread, req.Schedule, tx.Conn()); err != nil {
			if errors.Is(err, agentbridge.ErrScheduleTaken) {
				a.Refusal = err
				return a, ev, nil
			}
			return a, ev, err
		}
	}
	in := a.Input
	if a.MetaChanged {
		if meta, err = StoredMeta(&in.Meta); err != nil {
			return a, ev, err
		}
	}
	if in.Type == agentbridge.TypeMessage {
		if meta, err = MetaWithHop(in.Meta, meta, *in.Meta.Hop); err != nil {
			return a, ev, err
		}
	}
	ev, err = tx.Add(ctx, agentbridge.Event{Thread: req.Thread, Type: in.Type, From: in.From, To: in.To, Content: in.Content, Meta: in.Meta}, meta, ctl)
	if err != nil {
		return a, ev, err
	}
	if err := LinkAttachments(ctx, tx.Conn(), req.Thread, ev.ID, a.Attachments...); err != nil {
		return a, ev, err
	}
	if ch := ScheduleChangeOf(ev, ctl, a.Ignored, humans); ch != nil {
		if a.Ignored, err = ch.Write(ctx, req.Thread, tx.Conn()); err != nil {
			return a, ev, err
		}
	}
	if req.IdempotencyKey != "" {
		if err := tx.RecordKey(ctx, req.Thread, req.IdempotencyKey, ev.ID); err != nil {
			return a, ev, err
		}
	}
	return a, ev, nil
}

// MetaWithHop returns meta, the stored form of m without a hop, with m's
// hop added. Without extra keys no key sorts before "hop" (the typed keys
// are reply_to, tags and via), so it goes first and needs no re-encoding.
func MetaWithHop(m agentbridge.Meta, meta string, hop int) (string, error) {
	if len(m.Extra) > 0 {
		b, err := m.MarshalJSON()
		if err != nil {
			return "", fmt.Errorf("encode meta: %w", err)
		}
		return string(b), nil
	}
	prefix := `{"hop":` + strconv.Itoa(hop)
	if meta == "{}" {
		return prefix + "}", nil
	}
	return prefix + "," + meta[1:], nil
}

// admitAttachments checks that every attachment in names is stored
// (refusal unknown_attachment otherwise) and returns in with its
// meta.attachments written as stored, and the ids it names. It runs
// before the idempotency check, so that a retry is compared in the same
// form as the event its first try stored.
func admitAttachments(ctx context.Context, l AppendLookups, thread string, in agentbridge.EventInput) (agentbridge.EventInput, []string, *agentbridge.Error, error) {
	given, err := agentbridge.EventAttachments(in.Meta)
	if err != nil {
		var ae *agentbridge.Error
		if errors.As(err, &ae) {
			return in, nil, ae, nil
		}
		return in, nil, nil, err
	}
	diff := agentbridge.ChangeDiff(in.Meta)
	if len(given) == 0 && diff == "" {
		return in, nil, nil, nil
	}
	stored := make(map[string]agentbridge.Attachment, len(given)+1)
	ids := make([]string, 0, len(given)+1)
	for _, a := range append(given, agentbridge.Attachment{ID: diff}) {
		if a.ID == "" {
			continue
		}
		if _, seen := stored[a.ID]; seen {
			continue
		}
		s, found, err := l.Attachment(ctx, a.ID)
		if err != nil {
			return in, nil, nil, fmt.Errorf("look up attachment %s: %w", a.ID, err)
		}
		if !found {
			return in, nil, agentbridge.UnknownAttachment(thread, a.ID), nil
		}
		stored[a.ID] = s
		ids = append(ids, a.ID)
	}
	if len(given) > 0 {
		if in.Meta, err = agentbridge.NormalizeAttachments(in.Meta, given, stored); err != nil {
			return in, nil, nil, err
		}
	}
	return in, ids, nil, nil
}

// answeredEvent is the id of the permission request or question ctl
// answers, "" when it answers none. A control holding both keys names the
// permission request: one control answers one request.
func answeredEvent(ctl *agentbridge.Control) string {
	switch {
	case ctl == nil:
		return ""
	case ctl.Permission != nil:
		return ctl.Permission.Event
	case ctl.Answer != nil:
		return ctl.Answer.Event
	}
	return ""
}

// alreadyAnswered is the already_answered note on in, a human's answer to
// target (a permission request or a question), when an earlier event of
// the thread answered it; nil otherwise. It is decided in the writer, so
// that of two devices answering at once exactly one gets the note.
func alreadyAnswered(ctx context.Context, l AppendLookups, thread string, in agentbridge.EventInput, target agentbridge.Event, humans agentbridge.Humans) (*agentbridge.Ignored, error) {
	if !humans.Has(in.From) {
		return nil, nil
	}
	first, found, err := l.FirstAnswer(ctx, thread, target, func(e agentbridge.Event) bool { return agentbridge.Answers(e, target, humans) })
	if err != nil {
		return nil, fmt.Errorf("look up an earlier answer: %w", err)
	}
	if !found {
		return nil, nil
	}
	return agentbridge.AlreadyAnswered(target, first), nil
}

// replayAnswered is the already_answered note of stored, the event a
// replay names, when it was a human's second answer to a permission
// request or a question: the retry of an answer gets the note the first
// try got, whichever answer came between them. ctl is the replay's
// control, the same as stored's (agentbridge.CheckReplay).
func replayAnswered(ctx context.Context, l AppendLookups, thread string, stored agentbridge.Event, ctl *agentbridge.Control, humans agentbridge.Humans) (*agentbridge.Ignored, error) {
	if !humans.Has(stored.From) {
		return nil, nil
	}
	var targetID string
	switch {
	case stored.Type == agentbridge.TypeControl:
		targetID = answeredEvent(ctl)
	case stored.Type == agentbridge.TypeMessage:
		targetID = stored.Meta.ReplyTo
	}
	if targetID == "" {
		return nil, nil
	}
	target, found, err := l.Event(ctx, thread, targetID)
	if err != nil {
		return nil, fmt.Errorf("look up the answered event: %w", err)
	}
	if !found || (stored.Type == agentbridge.TypeMessage && !agentbridge.IsQuestion(target)) {
		return nil, nil
	}
	first, found, err := l.FirstAnswer(ctx, thread, target, func(e agentbridge.Event) bool { return agentbridge.Answers(e, target, humans) })
	if err != nil {
		return nil, fmt.Errorf("look up an earlier answer: %w", err)
	}
	if !found || first.ID == stored.ID {
		return nil, nil
	}
	return agentbridge.AlreadyAnswered(target, first), nil
}

// Found turns the error of a one-row lookup into whether the row was
// there: no row is found=false and no error.
func Found(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	}
	return false, err
}

// ThreadExists is the error for creating a thread whose id is taken.
func ThreadExists(id string) *agentbridge.Error {
	return &agentbridge.Error{
		Code: agentbridge.ECodeThreadExists, Field: "id", Thread: id,
		Message: fmt.Sprintf("A thread with id %q already exists; choose another id or leave it out.", id),
	}
}

// ThreadID is the id of a thread req creates: req.ID, or a new ULID drawn
// from entropy.
func ThreadID(req agentbridge.CreateThreadRequest, entropy io.Reader) (string, error) {
	if req.ID != "" {
		return req.ID, nil
	}
	u, err := ulid.New(ulid.Now(), entropy)
	if err != nil {
		return "", fmt.Errorf("new thread id: %w", err)
	}
	return u.String(), nil
}

// CreatedEvent is the thread.created event (seq 1, before the store stamps
// its id and ts) of thread id that req creates, and the stored form of the
// empty state the thread starts with.
func CreatedEvent(id string, req agentbridge.CreateThreadRequest) (ev agentbridge.Event, zeroState string, err error) {
	zero, err := StateKey(agentbridge.ThreadState{})
	if err != nil {
		return agentbridge.Event{}, "", err
	}
	content, err := json.Marshal(req.Name)
	if err != nil {
		return agentbridge.Event{}, "", fmt.Errorf("encode thread name: %w", err)
	}
	return agentbridge.Event{
		Seq: 1, Thread: id, Type: agentbridge.TypeThreadCreated,
		From: req.From, To: agentbridge.ToAll, Content: content,
	}, zero, nil
}
