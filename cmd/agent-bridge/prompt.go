package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/agent-bridge/agent-bridge/adapters"
	"github.com/spf13/cobra"
)

// promptCommand reads an adapter payload on stdin and prints the rendered prompt
// (adapters.RenderPrompt), or with --field one value of the payload, so that
// adapters written in shell need neither jq nor python.
func (m *Main) promptCommand(c *cobra.Command) runFunc {
	fs := c.Flags()
	field := fs.String("field", "", "print one payload field instead of the prompt: content, thread_id, event_id, from, to, "+
		"primer, participant.id, participant.profile.model, thread.name, trigger.seq, context_window.0.content ... "+
		"(strings as text, other values as JSON, a missing one as an empty line)")
	fresh := fs.Bool("fresh", false, "render for a new session (the primer and the whole context window) even when session.id is set, "+
		"as an adapter does when the CLI refused to resume the session")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: agent-bridge prompt [--fresh] [--field NAME] < payload.json")
		fs.PrintDefaults()
	}
	return func(_ context.Context, pos []string) error {
		if len(pos) > 0 {
			return usagef("prompt: unexpected argument %q: the payload is read from stdin", pos[0])
		}
		raw, err := io.ReadAll(m.Stdin)
		if err != nil {
			return fmt.Errorf("prompt: read stdin: %w", err)
		}
		if *field != "" {
			v, err := payloadField(raw, *field)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(m.rawOut(), v)
			return err
		}
		var p adapters.Payload
		if err := json.Unmarshal(raw, &p); err != nil {
			return usagef("prompt: stdin is not an adapter payload (a JSON object): %v", err)
		}
		if *fresh {
			p.Session = adapters.SessionInfo{}
		}
		_, err = io.WriteString(m.rawOut(), adapters.RenderPrompt(p))
		return err
	}
}

// payloadField returns the value at the dotted path name in the payload:
// strings as they are, numbers, booleans, objects and arrays as JSON, and
// an absent value as "" (payloads of older coordinators lack some fields,
// and most fields appear only in some modes, such as party and scene).
func payloadField(raw []byte, name string) (string, error) {
	path := strings.Split(name, ".")
	if slices.Contains(path, "") {
		return "", usagef("--field: %q is not a dotted path (such as content, participant.id or party.round)", name)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", usagef("prompt: stdin is not an adapter payload (a JSON object): %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return "", usagef("prompt: stdin is not an adapter payload: expected a JSON object")
	}
	for _, key := range path {
		switch node := v.(type) {
		case map[string]any:
			v = node[key]
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(node) {
				v = nil
			} else {
				v = node[i]
			}
		default:
			v = nil
		}
	}
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return "", fmt.Errorf("--field %s: %w", name, err)
		}
		return string(b), nil
	}
}
