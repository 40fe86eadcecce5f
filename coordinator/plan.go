package coordinator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/agent-bridge/agent-bridge/coordinator/config"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/coordinator/rules"
)

// The plan of a run's outcome: pure functions, without I/O, from what the
// runs returned (and the facts gathered before them, prepare.go) to the
// ledger outcome and the post it owes.

// planOutcome decides, without I/O, what an invocation's runs come to: the
// ledger outcome and the post it owes (a reply, a scene step's events, an
// error notice, or nothing). questionTo is the recipient of a question
// directive (questionTo read it).
func planOutcome(cfg *config.Config, inv ledger.Invocation, in prepared, first agentRun, correction *agentRun, questionTo string) ledger.Outcome {
	o := outcomeOf(first, cfg.AdapterTimeout)
	var post agentbridge.EventInput
	switch o.Status {
	case ledger.StatusCancelled, ledger.StatusInterrupted:
	case ledger.StatusSucceeded:
		if in.scene != nil {
			sceneOutcome(cfg, inv, in.scene, first.res, correction, &o)
			return o
		}
		post = replyPost(cfg, inv, string(first.res.Stdout), questionTo, &o)
	default:
		post = errorPost(cfg, inv, o.Error)
		if in.scene != nil && in.scene.step.Step == agentbridge.SceneStepTurn {
			// A turn that fails leaves the scene without its next
			// speech: the error notice closes it.
			post.Meta.Extra[agentbridge.MetaScene] = mustJSON(agentbridge.SceneMeta{Close: agentbridge.CloseError})
		}
	}
	if post.From != "" {
		post.Meta = withPartyMeta(post.Meta, inv)
		o.Posts = []agentbridge.EventInput{post}
	}
	return o
}

// agentRun is one run of an agent: its result and, when not empty, the
// sentence for the thread when it failed in a way adapters.ErrorMessage
// cannot word.
type agentRun struct {
	res adapters.Result
	why string
	// failure is the one the adapter or agent reported on its progress
	// fd, nil when it reported none.
	failure *agentbridge.Failure
}

// outcomeOf is what an agent run's result says of the invocation: the
// ledger outcome's times, output and status (succeeded for a run that
// worked, whose post the caller adds) and its error text. Invocations,
// scene correction runs and ACP turns all end through it.
func outcomeOf(run agentRun, timeout time.Duration) ledger.Outcome {
	res := run.res
	o := ledger.Outcome{
		Started: res.Started, Finished: res.Finished,
		OutputBytes: res.StdoutBytes, StderrTail: string(res.StderrTail), ProgressBad: res.ProgressBad,
	}
	if res.PID != 0 {
		code := res.ExitCode
		o.ExitCode = &code
	}
	switch {
	case res.Cancelled:
		// The cancel already recorded the status; Finish keeps it.
		o.Status, o.Error = ledger.StatusCancelled, cancelReason("")
	case res.Interrupted:
		o.Status, o.Error = ledger.StatusInterrupted, adapters.ErrorMessage(res, timeout)
	case res.OK():
		o.Status = ledger.StatusSucceeded
	default:
		o.Status = ledger.StatusFailed
		if res.TimedOut {
			o.Status = ledger.StatusTimeout
		}
		o.Error = cmp.Or(run.why, adapters.ErrorMessage(res, timeout))
		if run.failure != nil && run.failure.Message != "" {
			// The adapter said why (a usage limit it stopped at, say):
			// that comes first, the exit status and stderr after.
			o.Error = run.failure.Message + "\n\n" + o.Error
		}
	}
	o.Failure = failureOf(run, o)
	return o
}

// errorPost is the coordinator's message saying a participant's adapter
// failed. meta.participant names the pair, so recovery can tell whose error
// it is.
func errorPost(cfg *config.Config, inv ledger.Invocation, msg string) agentbridge.EventInput {
	text := fmt.Sprintf("%s could not answer: %s", inv.Participant, msg)
	return agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: cfg.CoordinatorID, To: agentbridge.ToAll,
		Content: mustJSON(adapters.TruncateReply(text, cfg.MaxReplyChars)),
		Meta: agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator", "error"},
			Extra: map[string]json.RawMessage{rules.MetaParticipant: mustJSON(inv.Participant)}},
	}
}

// withPartyMeta marks a party invocation's post with meta.party, so that
// readers (and recovery) know which round it answers.
func withPartyMeta(m agentbridge.Meta, inv ledger.Invocation) agentbridge.Meta {
	if inv.Round == 0 {
		return m
	}
	extra := make(map[string]json.RawMessage, len(m.Extra)+1)
	for k, v := range m.Extra {
		extra[k] = v
	}
	extra[rules.MetaParty] = mustJSON(rules.PartyMeta{Round: inv.Round, Trigger: inv.TriggerID})
	m.Extra = extra
	return m
}

// replyPost applies the reply directives to a successful run's output: it
// sets o's status and returns the event to post (zero for a pass).
// questionTo is where a question goes.
func replyPost(cfg *config.Config, inv ledger.Invocation, stdout, questionTo string, o *ledger.Outcome) agentbridge.EventInput {
	d := ParseDirective(stdout)
	if d.Kind == DirectivePass {
		o.Status = ledger.StatusPassed
		return agentbridge.EventInput{}
	}
	o.Status = ledger.StatusSucceeded
	// No meta.hop: the bridge assigns it from reply_to (contract 5.1).
	post := agentbridge.EventInput{
		Type: agentbridge.TypeMessage, From: inv.Participant, To: agentbridge.ToAll,
		Content: mustJSON(adapters.TruncateReply(stdout, cfg.MaxReplyChars)),
		Meta:    agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator"}},
	}
	if d.Kind == DirectiveQuestion {
		post.To = questionTo
		post.Meta.Tags = []string{"coordinator", "question"}
	}
	return post
}

// sceneOutcome turns a successful actor run into what is owed to the
// thread: for a turn, its private thinking and its speech to the next
// actor, after at most one correction run (correction, when there was
// one); for the journal step, the private journal event and the journal
// entry itself.
func sceneOutcome(cfg *config.Config, inv ledger.Invocation, sr *sceneRun, res adapters.Result, correction *agentRun, o *ledger.Outcome) {
	private := map[string]json.RawMessage{agentbridge.MetaPrivate: json.RawMessage("true")}
	meta := func(extra map[string]json.RawMessage) agentbridge.Meta {
		return agentbridge.Meta{ReplyTo: inv.TriggerID, Via: cfg.CoordinatorID, Tags: []string{"coordinator"}, Extra: extra}
	}
	if sr.step.Step == agentbridge.SceneStepJournal {
		text := adapters.TruncateReply(string(res.Stdout), cfg.MaxReplyChars)
		o.Status = ledger.StatusSucceeded
		o.Posts = []agentbridge.EventInput{{Type: agentbridge.TypeJournal, From: inv.Participant, To: inv.Participant,
			Content: mustJSON(text), Meta: meta(private)}}
		o.Journal = &ledger.JournalEntry{Participant: inv.Participant, Thread: inv.Thread, ThreadName: sr.threadName, Entry: text}
		return
	}
	thinking, speech, ok := agentbridge.ParseSceneOutput(string(res.Stdout))
	corrected := false
	if !ok && correction != nil {
		res = correction.res
		co := outcomeOf(*correction, cfg.AdapterTimeout)
		o.Finished, o.OutputBytes, o.StderrTail = co.Finished, o.OutputBytes+co.OutputBytes, co.StderrTail
		switch co.Status {
		case ledger.StatusSucceeded:
		case ledger.StatusCancelled, ledger.StatusInterrupted:
			o.Status, o.Error = co.Status, co.Error
			return
		default:
			o.Status, o.Error = co.Status, co.Error
			post := errorPost(cfg, inv, o.Error)
			post.Meta.Extra[agentbridge.MetaScene] = mustJSON(agentbridge.SceneMeta{Close: agentbridge.CloseError})
			o.Posts = []agentbridge.EventInput{post}
			return
		}
		thinking, speech, ok = agentbridge.ParseSceneOutput(string(res.Stdout))
		corrected = true
	}
	if !ok {
		o.Status = ledger.StatusFailed
		o.Error = "the answer did not use the <thinking> and <speech> tags, even after the correction prompt"
		post := errorPost(cfg, inv, "Its answer did not use the <thinking> and <speech> tags, even after the correction prompt, so the scene is closed.")
		post.Meta.Extra[agentbridge.MetaScene] = mustJSON(agentbridge.SceneMeta{Close: agentbridge.CloseError})
		o.Posts = []agentbridge.EventInput{post}
		return
	}
	o.Status = ledger.StatusSucceeded
	if thinking != "" {
		o.Posts = append(o.Posts, agentbridge.EventInput{Type: agentbridge.TypeThinking, From: inv.Participant, To: inv.Participant,
			Content: mustJSON(adapters.TruncateReply(thinking, cfg.MaxReplyChars)), Meta: meta(private)})
	}
	// No meta.hop: a scene's speeches are not bound by the loop guard, and
	// the bridge derives the hop from reply_to (contract 5.1).
	sm := meta(map[string]json.RawMessage{agentbridge.MetaScene: mustJSON(agentbridge.SceneMeta{Turn: sr.step.Turn, Corrected: corrected})})
	o.Posts = append(o.Posts, agentbridge.EventInput{Type: agentbridge.TypeMessage, From: inv.Participant, To: sr.next,
		Content: mustJSON(adapters.TruncateReply(speech, cfg.MaxReplyChars)), Meta: sm})
}

// mustJSON encodes values that cannot fail to encode (strings, events).
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("encode %T: %v", v, err))
	}
	return b
}
