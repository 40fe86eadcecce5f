package adapters

import (
	"fmt"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Attachment is one file of the events in a payload (contract 8.2): the
// attachment as the bridge holds it, the newest event of the payload that
// names it, and Path, the copy the coordinator wrote for this run (absent
// when it could not: too many or too large for one run, or the download
// failed). The copy is the run's, removed when the run ends.
type Attachment struct {
	agentbridge.Attachment
	Event string `json:"event"`
	Path  string `json:"path,omitempty"`
}

// AttachmentsOf lists the attachments the events name, each once, in the
// order they first appear (events oldest first, as a payload's are), with
// the newest event naming each. Never nil.
func AttachmentsOf(lists ...[]agentbridge.Event) []Attachment {
	out := []Attachment{}
	at := map[string]int{}
	newest := map[string]int64{} // an attachment's id → the seq of its Event
	for _, events := range lists {
		for _, e := range events {
			for _, a := range agentbridge.StoredAttachments(e.Meta) {
				i, ok := at[a.ID]
				if !ok {
					at[a.ID], newest[a.ID] = len(out), e.Seq
					out = append(out, Attachment{Attachment: a, Event: e.ID})
					continue
				}
				if e.Seq > newest[a.ID] {
					out[i].Event, newest[a.ID] = e.ID, e.Seq
				}
			}
		}
	}
	return out
}

// attachmentLines renders the files of one event for a prompt, one line
// each, with where this run's copy is; "" when the event has none.
func attachmentLines(e agentbridge.Event, files []Attachment) string {
	list := agentbridge.StoredAttachments(e.Meta)
	if len(list) == 0 {
		return ""
	}
	paths := make(map[string]string, len(files))
	for _, f := range files {
		paths[f.ID] = f.Path
	}
	var b strings.Builder
	for _, a := range list {
		fmt.Fprintf(&b, "[attached: %s", a.Describe())
		if p := paths[a.ID]; p != "" {
			fmt.Fprintf(&b, " at %s", p)
		} else {
			b.WriteString(", not copied for this run")
		}
		b.WriteString("]\n")
	}
	return b.String()
}
