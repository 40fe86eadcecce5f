package mcpserver

import (
	"fmt"
	"io"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// writeEvents renders events one per entry: a header line with what a model
// needs to refer back (seq, id, sender, recipient, reply link) and the
// content, continuation lines indented so entries stay apart.
func writeEvents(w io.Writer, events []agentbridge.Event) {
	for _, e := range events {
		writeEvent(w, e)
	}
}

func writeEvent(w io.Writer, e agentbridge.Event) {
	fmt.Fprintf(w, "#%d id=%s %s %s -> %s", e.Seq, e.ID, shortTime(e.TS), e.From, e.To)
	if e.Type != agentbridge.TypeMessage {
		fmt.Fprintf(w, " [%s]", e.Type)
	}
	if e.Meta.ReplyTo != "" {
		fmt.Fprintf(w, " reply_to=%s", e.Meta.ReplyTo)
	}
	if len(e.Meta.Tags) > 0 {
		fmt.Fprintf(w, " tags=%s", strings.Join(e.Meta.Tags, ","))
	}
	text := strings.TrimRight(e.Text(), "\n")
	fmt.Fprintf(w, ":\n  %s\n", strings.ReplaceAll(text, "\n", "\n  "))
	for _, a := range agentbridge.StoredAttachments(e.Meta) {
		fmt.Fprintf(w, "  [file] %s: agent-bridge get %s\n", a.Describe(), a.ID)
	}
}

// shortTime drops the date's fractional seconds: "2026-11-23 21:09:23Z".
// A timestamp of another shape is shown as it is.
func shortTime(ts string) string {
	if len(ts) >= 19 && ts[10] == 'T' {
		return ts[:10] + " " + ts[11:19] + "Z"
	}
	return ts
}
