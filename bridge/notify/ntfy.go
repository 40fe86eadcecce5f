package notify

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Ntfy is the bridge config's notify.ntfy: an ntfy topic (self-hosted or
// public) that gets the same notes as the devices.
type Ntfy struct {
	// URL is the topic's URL, such as https://ntfy.sh/my-topic.
	URL string `json:"url"`
	// TokenFile holds an ntfy access token, sent as a bearer token to the
	// ntfy server (never the bridge's own token).
	TokenFile string `json:"token_file,omitempty"`
	// IncludeContent sends the message's text; without it a note says only
	// what happened and where (the topic may be public).
	IncludeContent bool `json:"include_content,omitempty"`
	// Categories are the kinds of note the topic gets (agentbridge.Push*:
	// permission, question, failed, reply); nil means DefaultNtfyCategories.
	// Every reply is there only when asked for: a topic that buzzes at each
	// agent's answer is soon muted, and with it the requests that wait.
	Categories []string `json:"categories,omitempty"`
}

// DefaultNtfyCategories are the notes an ntfy topic gets unless its config
// says otherwise: what waits for the person, and what went wrong.
var DefaultNtfyCategories = []string{agentbridge.PushPermission, agentbridge.PushQuestion, agentbridge.PushFailed}

// NtfyCategories are the categories notify.ntfy.categories may name.
var NtfyCategories = []string{agentbridge.PushPermission, agentbridge.PushQuestion, agentbridge.PushFailed, agentbridge.PushReply}

// wants reports whether the topic gets notes of category.
func (c Ntfy) wants(category string) bool {
	list := c.Categories
	if list == nil {
		list = DefaultNtfyCategories
	}
	return slices.Contains(list, category)
}

// ntfyBodies is a note's text when the topic gets no content: what the
// person can do about it, by category ("%s" is the thread's name).
var ntfyBodies = map[string]string{
	agentbridge.PushPermission: "In “%s”: open it to answer.",
	agentbridge.PushQuestion:   "In “%s”: open it to answer.",
	agentbridge.PushFailed:     "In “%s”: open it to see why.",
	agentbridge.PushReply:      "In “%s”: open it to read it.",
}

// maxTitleRunes bounds ntfy's Title header: a notification shows one line.
const maxTitleRunes = 120

// sendNtfy publishes note to the topic: title, priority per category, a
// click link to the event, and what the agent wrote (the text, a tool's
// title) only when the config says so, since a topic may be public.
func (n *Notifier) sendNtfy(ctx context.Context, note Note) error {
	body := fmt.Sprintf(ntfyBodies[note.Category], n.threadName(ctx, note.Thread))
	title := note.Headline
	if n.opts.Ntfy.IncludeContent {
		body, title = note.Body, note.Title
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.opts.Ntfy.URL, strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("ntfy request: %w", err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("Title", headerValue(title, maxTitleRunes))
	req.Header.Set("Priority", strconv.Itoa(deliveryOf(note.Category).priority))
	req.Header.Set("Tags", note.Category)
	if base := strings.TrimRight(n.opts.BaseURL(), "/"); base != "" {
		req.Header.Set("Click", base+note.URL)
	}
	if n.opts.Ntfy.TokenFile != "" {
		b, err := os.ReadFile(n.opts.Ntfy.TokenFile)
		if err != nil {
			return fmt.Errorf("ntfy token file: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(b)))
	}
	resp, err := n.opts.Client.Do(req)
	if err != nil {
		return fmt.Errorf("ntfy: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("ntfy answered %s", resp.Status)
	}
	return nil
}

// threadName is the name people know thread by, else its id.
func (n *Notifier) threadName(ctx context.Context, thread string) string {
	if n.opts.ThreadName != nil {
		if name := n.opts.ThreadName(ctx, thread); name != "" {
			return name
		}
	}
	return thread
}

// headerValue makes text fit for an HTTP header: one line (line breaks
// and other spaces become one space), without control or format
// characters (a bidirectional override could disguise the rest), clipped
// to max runes, and RFC 2047-encoded when not ASCII, which ntfy decodes
// and no proxy on the way mangles. Without it an agent's newline in a
// tool's title would make the request fail.
func headerValue(text string, max int) string {
	var b strings.Builder
	space := false
	for _, r := range text {
		switch {
		case unicode.IsSpace(r):
			space = b.Len() > 0
			continue
		case unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError:
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return mime.QEncoding.Encode("utf-8", agentbridge.Clip(b.String(), max))
}
