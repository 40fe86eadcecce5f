package ledger

import (
	"bytes"
	"encoding/json"
	"fmt"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// The events a run or a decision owes travel typed through the
// coordinator; they become JSON only here, in the row that keeps them
// across a crash, and are decoded only when such a row is read back.

// encodePosts is the stored form of an outcome's posts: "" for none, one
// event as an object, several as an array (the form every row has had, so
// rows written by either form read back the same).
func encodePosts(posts []agentbridge.EventInput) (string, error) {
	var v any = posts
	switch len(posts) {
	case 0:
		return "", nil
	case 1:
		v = posts[0]
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode the post: %w", err)
	}
	return string(b), nil
}

// PendingPosts decodes the events the invocation's row still owes: one
// event or an array of them.
func (inv Invocation) PendingPosts() ([]agentbridge.EventInput, error) {
	if t := bytes.TrimSpace(inv.PendingPost); len(t) > 0 && t[0] == '[' {
		var posts []agentbridge.EventInput
		err := json.Unmarshal(inv.PendingPost, &posts)
		return posts, err
	}
	var in agentbridge.EventInput
	err := json.Unmarshal(inv.PendingPost, &in)
	return []agentbridge.EventInput{in}, err
}

// encodeNotice is the stored form of a notice's event.
func encodeNotice(n Notice) (string, error) {
	b, err := json.Marshal(n.Post)
	if err != nil {
		return "", fmt.Errorf("encode notice %s of %s: %w", n.Kind, n.TriggerID, err)
	}
	return string(b), nil
}

// decodeNotice reads a stored notice's event into n.
func decodeNotice(n *Notice, post string) error {
	if err := json.Unmarshal([]byte(post), &n.Post); err != nil {
		return fmt.Errorf("decode notice %s of %s: %w", n.Kind, n.TriggerID, err)
	}
	return nil
}
