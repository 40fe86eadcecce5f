package acp

import (
	"regexp"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/agent-bridge/agent-bridge/adapters"
)

// agentWarnings are the warnings ACP agents send as message chunks, in the
// reply's place, before the answer: codex-acp 0.16 sends codex's "Model
// metadata for `…` not found" (for a model it has no metadata for) as an
// agent_message_chunk of its own, which glued itself onto the front of
// the reply. A chunk that is the whole of one of these, arriving before
// any text of the reply, becomes a progress record of kind "warning" (as
// codex exec's error items do, adapters/stream.go) instead of reply text.
var agentWarnings = []*regexp.Regexp{
	regexp.MustCompile("^Model metadata for `[^`\n]+` not found\\.[^\n]*$"),
}

// warning reports whether the message chunk c is an agent's warning (see
// agentWarnings), and if so records it as progress.
func (t *turn) warning(c sdk.ContentBlock) bool {
	if c.Text == nil {
		return false
	}
	t.mu.Lock()
	started := t.reply.Len() > 0
	t.mu.Unlock()
	if started {
		return false
	}
	for _, re := range agentWarnings {
		if re.MatchString(c.Text.Text) {
			t.progress(adapters.ProgressRecord{Status: oneLineStatus("warning: " + c.Text.Text), Kind: "warning",
				Detail: jsonOf(map[string]string{"message": c.Text.Text})})
			return true
		}
	}
	return false
}
