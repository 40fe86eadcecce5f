package agentbridge

import "encoding/json"

// MetaPermission is the meta key of an ACP agent's permission request
// message (contract 6.6): {"invocation", "tool_call", "options": [{"id",
// "name", "kind"}]}.
const MetaPermission = "permission"

// CheckPermissionAnswer refuses a permission control that nothing could act
// on (contract 6.3): one naming an event that is not in the thread (found
// false), or not a permission request, or an option the request does not
// offer. e is the event the control names.
func CheckPermissionAnswer(c PermissionControl, e Event, found bool) error {
	var req struct {
		Options []struct {
			ID string `json:"id"`
		} `json:"options"`
	}
	raw, isRequest := e.Meta.Extra[MetaPermission]
	switch {
	case !found:
		return badControl("permission", "The permission answer names event %q, which is not in this thread; give the id of the permission request message.", Clip(c.Event, QuoteRunes))
	case !isRequest || json.Unmarshal(raw, &req) != nil:
		return badControl("permission", "Event %q is not a permission request, so there is nothing to answer; give the id of the permission request message (the one with the options).", c.Event)
	}
	ids := make([]string, 0, len(req.Options))
	for _, o := range req.Options {
		if o.ID == c.Option {
			return nil
		}
		ids = append(ids, o.ID)
	}
	return badControl("permission", "The permission request %s offers the options %s, not %q.", c.Event, quoteList(ids), Clip(c.Option, QuoteRunes))
}

// quoteList is ids quoted and joined with commas.
func quoteList(ids []string) string {
	out := ""
	for i, id := range ids {
		if i > 0 {
			out += ", "
		}
		b, _ := json.Marshal(id)
		out += string(b)
	}
	return out
}
