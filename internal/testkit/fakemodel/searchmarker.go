package fakemodel

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
)

// SearchMarker, followed by a query up to the end of its line, in a
// prompt makes SearchResponder's model search the bridge's threads with
// its MCP tool search (contract 8.6), as a model asked "what did we decide
// about X?" would.
const SearchMarker = "PLEASE_SEARCH_BRIDGE:"

// SearchQuoted begins the reply SearchResponder gives once the tool's
// result is back; the hits it quotes follow.
const SearchQuoted = "Found in the bridge's threads: "

// SearchResponder answers a Messages API request (claude) whose
// conversation holds SearchMarker: first with a call of the MCP tool
// mcp__<server>__search with the query that follows the marker, then,
// once the conversation carries a tool result, with a reply quoting it
// (SearchQuoted, then each hit's text with its thread and sender, leaving
// out the question itself). Other requests are left to the queue (ok
// false).
func SearchResponder(server string) Responder {
	return func(r Request) (Reply, bool) {
		if r.API != Anthropic || !r.Contains(SearchMarker) {
			return Reply{}, false
		}
		conv, ok := readConversation(r.Body)
		if !ok || conv.query == "" {
			return Reply{}, false
		}
		if conv.result != "" {
			return Reply{Text: SearchQuoted + quoteHits(conv.result)}, true
		}
		return Reply{Tool: &ToolCall{Name: "mcp__" + server + "__search", Input: map[string]string{"query": conv.query}}}, true
	}
}

// conversation is what SearchResponder reads of a Messages API request:
// the query after the marker and the last tool result's text.
type conversation struct {
	query, result string
}

// readConversation reads the messages of body, whose content is a string
// or a list of blocks: text blocks, and tool_result blocks whose content
// is a string or a list of text blocks.
func readConversation(body []byte) (conversation, bool) {
	var req struct {
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return conversation{}, false
	}
	var c conversation
	for _, m := range req.Messages {
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			c.findQuery(s)
			continue
		}
		var blocks []struct {
			Type    string          `json:"type"`
			Text    string          `json:"text"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				c.findQuery(b.Text)
			case "tool_result":
				c.result = blockText(b.Content)
			}
		}
	}
	return c, true
}

// findQuery keeps the query after the first SearchMarker in text.
func (c *conversation) findQuery(text string) {
	_, after, ok := strings.Cut(text, SearchMarker)
	if !ok || c.query != "" {
		return
	}
	line, _, _ := strings.Cut(after, "\n")
	c.query = strings.TrimSpace(line)
}

// blockText is a tool result's content as text: a string, or its text
// blocks joined.
func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &blocks)
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.TrimSpace(strings.Join(parts, "\n"))
}

// quoteHits quotes the hits of the search tool's result: its structured
// content (which claude hands the model in place of the text, followed by
// notes of its own), each hit's text with its thread and sender; the
// result as it is when it holds no hits.
func quoteHits(result string) string {
	var out struct {
		Hits []struct {
			Thread     string `json:"thread"`
			ThreadName string `json:"thread_name"`
			From       string `json:"from"`
			Snippet    string `json:"snippet"`
			Text       string `json:"text"`
		} `json:"hits"`
	}
	if json.NewDecoder(strings.NewReader(result)).Decode(&out) != nil || len(out.Hits) == 0 {
		return result
	}
	var quotes []string
	for _, h := range out.Hits {
		text := cmp.Or(h.Text, h.Snippet)
		if strings.Contains(text, SearchMarker) {
			continue // the question that asked for the search
		}
		quotes = append(quotes, fmt.Sprintf("%q (thread %s, from %s)", text, cmp.Or(h.ThreadName, h.Thread), h.From))
	}
	if len(quotes) == 0 {
		return "nothing but the question"
	}
	return strings.Join(quotes, "; ")
}
