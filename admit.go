package agentbridge

import "fmt"

// ReplyTarget is what the store found for an append's meta.reply_to: whether
// the thread holds that event, and its hop. The zero value means "not found"
// and is what an input without reply_to carries.
type ReplyTarget struct {
	Found bool
	Hop   int
	// Seq is the event's seq in the thread, for the hop floor
	// (HopFloor).
	Seq int64
}

// Admit decides whether in may be appended to thread, whose state before it
// is s: the rules that need the thread (no client hop, reply_to, a party of
// invited agents only, scene controls, hard mute, pause), after
// EventInput.Validate has checked the input on its own. It is pure so that
// every store enforces the same rules and they are tested as a table; the
// store only looks up the facts (s and reply) and writes what is admitted.
// c is in's control as AppendRequest.Validate parsed it (nil for any other
// type). The error is an *Error a client should see.
func Admit(thread string, s ThreadState, in EventInput, c *Control, reply ReplyTarget, humans Humans) error {
	if in.Meta.Hop != nil {
		return hopNotAllowed()
	}
	if in.Meta.ReplyTo != "" && !reply.Found {
		return &Error{
			Code: ECodeUnknownReplyTo, Field: "meta.reply_to", Thread: thread,
			Message: fmt.Sprintf("meta.reply_to names %q, which is not an event of thread %q.", Clip(in.Meta.ReplyTo, QuoteRunes), thread),
		}
	}
	if err := admitParty(thread, s, c); err != nil {
		return err
	}
	if err := checkSceneControl(s, c); err != nil {
		return err
	}
	if in.Type != TypeMessage {
		return nil
	}
	if s.IsHardMuted(in.From) {
		return &Error{
			Code: ECodeParticipantMuted, Thread: thread, Participant: in.From,
			Message: fmt.Sprintf("%s is muted in thread %q; a human can unmute them with an unmute control.", in.From, thread),
		}
	}
	if s.Paused && !humans.Has(in.From) {
		return &Error{
			Code: ECodeThreadPaused, Thread: thread, Participant: in.From,
			Message: fmt.Sprintf("Thread %q is paused, so only humans may post messages; a human can resume it with {\"pause\":{\"on\":false}}.", thread),
		}
	}
	return nil
}

// AssignHop is the hop the bridge gives an admitted message (contract 5.1):
// 0 from a human; otherwise 1 + the hop of its reply_to event when it has
// one, else 1 + the hop of the thread's previous message (s.LastHop; a
// thread without messages counts as hop -1, so its first message from an
// agent is hop 0). Only the bridge assigns it, so no client can reset an
// agent chain by posting directly.
func AssignHop(s ThreadState, in EventInput, reply ReplyTarget, humans Humans, hasMessages bool) int {
	switch {
	case humans.Has(in.From):
		return 0
	case in.Meta.ReplyTo != "" && reply.Found:
		return reply.Hop + 1
	case !hasMessages:
		return 0
	}
	return s.LastHop + 1
}

func hopNotAllowed() *Error {
	return FieldErrorf(ECodeFieldNotAllowed, "meta.hop", "meta.hop is assigned by the server (the number of agent replies since the last human message); leave it out.")
}

// HopFloor raises hop, the hop AssignHop gave a message from a participant
// who is not human, to floor when floor is higher (contract 7.3): floor is
// the highest hop of that sender's own messages posted after the message's
// reply_to parent. A sender that has spoken since the parent was posted
// has answered something in that thread since, so choosing that older
// parent (a human's message: hop 0, or an early message of an agent
// chain) cannot start its count again: hop 6 stays 6 rather than becoming
// 1. A sender that has not spoken since the parent is answering it for the
// first time, and counts from it.
func HopFloor(hop, floor int) int { return max(hop, floor) }
