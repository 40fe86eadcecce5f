package agentbridge

import (
	"encoding/json"
	"fmt"
)

// IgnoredAlreadyAnswered: a permission request answered a second time (the
// coordinator acts on the first answer only), or a human's second reply to
// a [USER QUESTION] (kept and routed as a message like any other, but not
// as the answer: the first reply was).
const IgnoredAlreadyAnswered = "already_answered"

// IsQuestion reports whether e is a [USER QUESTION] (contract 5.2): a
// message the coordinator posted tagged coordinator and question, answered
// by a reply. A question with fields (IsFieldQuestion) is not one: the
// answer control answers it, and a reply is a message like any other.
func IsQuestion(e Event) bool {
	return e.Type == TypeMessage && e.Meta.HasTag("coordinator") && e.Meta.HasTag("question") && !IsFieldQuestion(e)
}

// Answers reports whether e answers target, a permission request or a
// question: a human's permission or answer control naming target, or a
// human's message replying to a [USER QUESTION].
func Answers(e, target Event, humans Humans) bool {
	if !humans.Has(e.From) {
		return false
	}
	switch e.Type {
	case TypeControl:
		c := ControlOf(e)
		return c != nil && (c.Permission != nil && c.Permission.Event == target.ID || c.Answer != nil && c.Answer.Event == target.ID)
	case TypeMessage:
		return IsQuestion(target) && e.Meta.ReplyTo == target.ID
	}
	return false
}

// AlreadyAnswered is the note on an answer to target, which first answered
// before (contract 7.2 and 7.3): who answered and when, for the person on a
// second device.
func AlreadyAnswered(target, first Event) *Ignored {
	if IsQuestion(target) {
		return &Ignored{Code: IgnoredAlreadyAnswered, Reason: fmt.Sprintf(
			"this question was already answered by %s at %s; this reply is kept as a message like any other, not as the answer", first.From, first.TS)}
	}
	if IsFieldQuestion(target) {
		return &Ignored{Code: IgnoredAlreadyAnswered, Reason: fmt.Sprintf(
			"this question was already answered by %s at %s, so this answer has no effect", first.From, first.TS)}
	}
	choice := ""
	if c := ControlOf(first); c != nil && c.Permission != nil {
		if words := PermissionChoice(target, c.Permission.Option); words != "" {
			choice = ": " + words
		}
	}
	return &Ignored{Code: IgnoredAlreadyAnswered, Reason: fmt.Sprintf(
		"this permission request was already answered by %s at %s%s, so this answer has no effect", first.From, first.TS, choice)}
}

// choiceWords says what an answer decided, by its option's kind (ACP's
// allow_once, allow_always, reject_once, reject_always).
var choiceWords = map[string]string{
	"allow_once":    "allowed once",
	"allow_always":  "always allowed",
	"reject_once":   "rejected",
	"reject_always": "always rejected",
}

// PermissionChoice says in words what choosing option decided of the
// permission request req: `rejected ("Reject")`, so that the person whose
// later answer changed nothing reads what the first one did. It is ""
// when req offers no such option.
func PermissionChoice(req Event, option string) string {
	var p struct {
		Options []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
			Kind string `json:"kind"`
		} `json:"options"`
	}
	if json.Unmarshal(req.Meta.Extra[MetaPermission], &p) != nil {
		return ""
	}
	for _, o := range p.Options {
		if o.ID != option {
			continue
		}
		name := o.Name
		if name == "" {
			name = o.ID
		}
		if w := choiceWords[o.Kind]; w != "" {
			return fmt.Sprintf("%s (“%s”)", w, Clip(name, QuoteRunes))
		}
		return fmt.Sprintf("“%s” chosen", Clip(name, QuoteRunes))
	}
	return ""
}
