package agentbridge

import "encoding/json"

// Presence states a participant may report.
const (
	PresenceListening = "listening"
	PresenceThinking  = "thinking"
	PresenceTyping    = "typing"
	PresenceIdle      = "idle"
	PresenceOffline   = "offline"
)

// ValidPresenceState reports whether s is a known presence state.
func ValidPresenceState(s string) bool {
	switch s {
	case PresenceListening, PresenceThinking, PresenceTyping, PresenceIdle, PresenceOffline:
		return true
	}
	return false
}

// PresenceInput is what a participant posts to report its presence.
type PresenceInput struct {
	From    string          `json:"from"`
	State   string          `json:"state"`
	Details json.RawMessage `json:"details,omitempty"`
}

// Presence is one participant's ephemeral presence in a thread. It is kept
// in memory only and goes stale after the server's TTL.
type Presence struct {
	// Thread is set on presence changes sent over the global stream.
	Thread    string          `json:"thread,omitempty"`
	ID        string          `json:"id"`
	State     string          `json:"state"`
	UpdatedAt string          `json:"updated_at"`
	Stale     bool            `json:"stale"`
	Details   json.RawMessage `json:"details"`
}
