// Package notify reaches the person away from the desk (contract 7.2): it
// turns the events addressed to a human into notifications and sends them
// by Web Push (RFC 8291 encryption, RFC 8292 VAPID) to each subscribed
// device, and to an ntfy topic when one is configured.
//
// The bridge hands it each event it stores (Notifier.Event, after the
// commit): every event is stored through exactly one bridge, so of several
// bridges on one PostgreSQL exactly one notifies, with no poll.
package notify

import (
	"encoding/json"
	"fmt"
	"net/url"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// maxBodyRunes bounds a notification's text: a push payload holds about
// 4 KB, and a lock screen shows a few lines.
const maxBodyRunes = 300

// Note is one notification: its category (agentbridge.Push*), where it
// points, what it says, and a permission request's options.
type Note struct {
	Category string `json:"category"`
	Thread   string `json:"thread"`
	Event    string `json:"event"`
	Title    string `json:"title"`
	// Headline is the title without what the agent wrote (a tool's title,
	// a command, a path): who, and what kind of note. ntfy gets it unless
	// its config includes content; Web Push, encrypted to the device,
	// gets Title.
	Headline string   `json:"-"`
	Body     string   `json:"body"`
	URL      string   `json:"url"`
	Options  []Option `json:"options,omitempty"`
	// Actions are a permission request's answers offered on the
	// notification itself (contract 8.4), where the platform shows
	// them; AnswerAs is the human the request asks, whom the service
	// worker answers as.
	Actions  []Action `json:"actions,omitempty"`
	AnswerAs string   `json:"answer_as,omitempty"`
}

// Action is one button of a notification: the service worker answers
// the request with Option when it is tapped.
type Action struct {
	Action string `json:"action"`
	Title  string `json:"title"`
	Option string `json:"option"`
}

// Option is one answer a permission request offers, shown as a button.
type Option struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

// EventURL is the path of the UI page that opens thread at event: the
// thread's page, whose fragment names the event to show.
func EventURL(thread, event string) string {
	return "/ui/threads/" + url.PathEscape(thread) + "#event-" + url.PathEscape(event)
}

// Classify says whether e is addressed to a person and how to tell them:
//   - a permission request: a message with meta.permission (an ACP agent
//     asks; the coordinator posts it);
//   - a question: a question with fields (meta.question, an ACP agent's
//     form), or a message tagged "question" (an agent's [USER QUESTION]);
//   - a failed run: the coordinator's error notice, tagged "error" — the
//     notice, not the failed receipt, because it is an event with the
//     reason in words and its own place in the thread to open;
//   - a reply: any other message from someone who is not a human, unless
//     it is a notice of the coordinator about its own work.
func Classify(e agentbridge.Event, humans agentbridge.Humans) (Note, bool) {
	if e.Type != agentbridge.TypeMessage || humans.Has(e.From) {
		return Note{}, false
	}
	n := Note{Thread: e.Thread, Event: e.ID, URL: EventURL(e.Thread, e.ID), Body: agentbridge.Clip(e.Text(), maxBodyRunes)}
	// meta.participant names the agent a coordinator's notice is about;
	// it is any JSON a writer sent, so only a participant id is taken.
	who := e.From
	var participant string
	if raw, ok := e.Meta.Extra["participant"]; ok && json.Unmarshal(raw, &participant) == nil && agentbridge.ParticipantIDPattern.MatchString(participant) {
		who = participant
	}
	switch {
	case e.Meta.Extra[agentbridge.MetaPermission] != nil:
		var req struct {
			ToolCall struct {
				Title string `json:"title"`
			} `json:"tool_call"`
			Options []Option `json:"options"`
		}
		if err := json.Unmarshal(e.Meta.Extra[agentbridge.MetaPermission], &req); err != nil {
			return Note{}, false
		}
		tool := req.ToolCall.Title
		if tool == "" {
			tool = "a tool"
		}
		n.Category, n.Options = agentbridge.PushPermission, req.Options
		n.Headline = who + " asks permission"
		n.Title = agentbridge.Clip(fmt.Sprintf("%s: %s", n.Headline, tool), 120)
		if humans.Has(e.To) {
			n.Actions, n.AnswerAs = actionsOf(req.Options), e.To
		}
	case agentbridge.IsFieldQuestion(e):
		q, ok := agentbridge.QuestionOf(e)
		if !ok {
			return Note{}, false
		}
		n.Category, n.Headline = agentbridge.PushQuestion, who+" asks you a question"
		n.Title = agentbridge.Clip(fmt.Sprintf("%s asks: %s", who, q.Message), 120)
	case e.Meta.HasTag("question"):
		n.Category, n.Headline = agentbridge.PushQuestion, who+" asks you a question"
	case e.Meta.HasTag("error"):
		n.Category, n.Headline = agentbridge.PushFailed, "A run of "+who+" failed"
	case e.Meta.Via != "" && e.From == e.Meta.Via:
		return Note{}, false // the coordinator's own notices (cancelled, party, scene)
	default:
		n.Category, n.Headline = agentbridge.PushReply, e.From+" replied"
	}
	if n.Title == "" {
		n.Title = agentbridge.Clip(n.Headline, 120)
	}
	return n, true
}

// actionsOf is the notification's buttons for a permission request's
// options: "Allow once" for its allow_once option and "Deny" for its
// reject_once (else reject_always) option, those it offers. An "allow
// always" is left to the page, where the person sees what it means.
func actionsOf(opts []Option) []Action {
	pick := func(kinds ...string) (Option, bool) {
		for _, k := range kinds {
			for _, o := range opts {
				if o.Kind == k {
					return o, true
				}
			}
		}
		return Option{}, false
	}
	var out []Action
	if o, ok := pick("allow_once"); ok {
		out = append(out, Action{Action: "allow", Title: "Allow once", Option: o.ID})
	}
	if o, ok := pick("reject_once", "reject_always"); ok {
		out = append(out, Action{Action: "deny", Title: "Deny", Option: o.ID})
	}
	return out
}

// delivery is how urgently a category is sent: Web Push's TTL (how long
// the push service keeps it for a device that is off) and Urgency, and
// ntfy's priority (1–5).
type delivery struct {
	ttl      int
	urgency  string
	priority int
}

// deliveryOf is how a category is sent: a permission request waits for
// the person up to the coordinator's permission_timeout_s (3600 by
// default), so it is worth nothing later; a question or a failure keeps a
// day; a reply is the least urgent.
func deliveryOf(category string) delivery {
	switch category {
	case agentbridge.PushPermission:
		return delivery{ttl: 3600, urgency: "high", priority: 5}
	case agentbridge.PushQuestion:
		return delivery{ttl: 86400, urgency: "high", priority: 4}
	case agentbridge.PushFailed:
		return delivery{ttl: 86400, urgency: "normal", priority: 3}
	}
	return delivery{ttl: 3600, urgency: "low", priority: 2}
}
