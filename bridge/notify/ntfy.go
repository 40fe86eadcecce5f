package notify

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
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
}

// maxTitleRunes bounds ntfy's Title header: a notification shows one line.
const maxTitleRunes = 120

// sendNtfy publishes note to the topic: title, priority per category, a
// click link to the event, and what the agent wrote (the text, a tool's
// title) only when the config says so, since a topic may be public.
func (n *Notifier) sendNtfy(ctx context.Context, note Note) error {
	body := fmt.Sprintf("In thread %s: open it to answer.", note.Thread)
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
