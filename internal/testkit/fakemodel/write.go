package fakemodel

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
)

// WriteMarker, in the latest user message, makes the model answer
// WriteFile's way: "FAKEMODEL_WRITE:FILE=TEXT" (TEXT's underscores are
// spaces) has the client's own tools write TEXT and a newline to FILE, a
// path relative to the working directory the client's system prompt names.
const WriteMarker = "FAKEMODEL_WRITE:"

var writeMarker = regexp.MustCompile(`FAKEMODEL_WRITE:([A-Za-z0-9._/-]+)=([A-Za-z0-9_.,!-]*)`)

// workingDir finds the working directory claude's system prompt states
// ("Primary working directory: /path").
var workingDir = regexp.MustCompile(`(?i)working directory: ([^\\"\n]+)`)

// WriteFile is a Responder for claude (the Messages API) that changes a
// file with claude's own tools when the latest user message holds
// WriteMarker: it reads the file first (claude's Write refuses to replace
// a file it has not read), then writes it with the Write tool, then
// answers "Wrote FILE." once the tool's result is back. A request without
// the marker is left to the queue and the default.
func WriteFile(r Request) (Reply, bool) {
	if r.API != Anthropic {
		return Reply{}, false
	}
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return Reply{}, false
	}
	// The turn's prompt is the last user message that is not a tool's
	// result; what the assistant did since decides the next step.
	prompt, steps := -1, []string{}
	for i := len(body.Messages) - 1; i >= 0; i-- {
		m := body.Messages[i]
		if m.Role == "assistant" {
			steps = append(steps, toolUsed(m.Content))
			continue
		}
		if !strings.Contains(string(m.Content), `"tool_result"`) {
			prompt = i
			break
		}
	}
	if prompt < 0 {
		return Reply{}, false
	}
	mk := writeMarker.FindStringSubmatch(string(body.Messages[prompt].Content))
	wd := workingDir.FindStringSubmatch(string(r.Body))
	if mk == nil || wd == nil {
		return Reply{}, false
	}
	path := filepath.Join(strings.TrimSpace(wd[1]), mk[1])
	switch {
	case len(steps) == 0:
		return Reply{Tool: &ToolCall{Name: "Read", Input: map[string]any{"file_path": path}}}, true
	case steps[0] == "Read":
		return Reply{Tool: &ToolCall{Name: "Write", Input: map[string]any{"file_path": path, "content": strings.ReplaceAll(mk[2], "_", " ") + "\n"}}}, true
	}
	return Reply{Text: "Wrote " + mk[1] + "."}, true
}

// toolUsed is the name of the tool an assistant message's content calls,
// or "".
func toolUsed(content json.RawMessage) string {
	var blocks []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return ""
	}
	for _, b := range blocks {
		if b.Type == "tool_use" {
			return b.Name
		}
	}
	return ""
}
