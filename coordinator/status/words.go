package status

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// triggerLine is a trigger as one line for the runs table: a message's
// text, a control's sentence, a scene's close (a journal run's trigger).
func triggerLine(e agentbridge.Event) string {
	switch e.Type {
	case agentbridge.TypeControl:
		return controlLine(e.Content)
	case agentbridge.TypeSceneClosed:
		return fmt.Sprintf("the scene closed (%s): journals", e.Text())
	}
	return strings.Join(strings.Fields(e.Text()), " ")
}

// controlLine words a control's content: the keys a run can follow from
// (prod, scene) in words, any other key by name.
func controlLine(content json.RawMessage) string {
	var obj map[string]json.RawMessage
	if s := strings.TrimSpace(string(content)); strings.HasPrefix(s, `"`) {
		var inner string
		if json.Unmarshal(content, &inner) == nil {
			content = json.RawMessage(inner)
		}
	}
	if json.Unmarshal(content, &obj) != nil {
		return "a control"
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		switch k {
		case "prod":
			var ids []string
			_ = json.Unmarshal(obj[k], &ids)
			parts = append(parts, "prod "+strings.Join(ids, ", "))
		case "scene":
			var sc struct {
				On     bool     `json:"on"`
				Actors []string `json:"actors"`
			}
			_ = json.Unmarshal(obj[k], &sc)
			if sc.On {
				parts = append(parts, "scene started with "+strings.Join(sc.Actors, ", "))
			} else {
				parts = append(parts, "scene closed")
			}
		default:
			parts = append(parts, k+" control")
		}
	}
	return strings.Join(parts, "; ")
}

// runThreadName is a thread's name for the runs table: the folded state's
// when the thread is cached (it follows renames), else the last one read,
// else the bridge's, within ctx; "" when none can be had.
func (s *Server) runThreadName(ctx context.Context, thread string) string {
	if name, ok := s.src.CachedThreadName(thread); ok && name != "" {
		return name
	}
	s.excerpts.mu.Lock()
	name, ok := s.excerpts.names[thread]
	s.excerpts.mu.Unlock()
	if ok || ctx.Err() != nil {
		return name
	}
	th, err := s.src.Bridge().Thread(ctx, thread)
	if err != nil {
		return ""
	}
	s.excerpts.mu.Lock()
	if s.excerpts.names == nil || len(s.excerpts.names) >= excerptCache {
		s.excerpts.names = make(map[string]string)
	}
	s.excerpts.names[thread] = th.Name
	s.excerpts.mu.Unlock()
	return th.Name
}
