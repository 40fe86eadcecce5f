package agentbridge

// Thread is a named conversation: an ordered log of events.
type Thread struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
	// LastSeq is the seq of the thread's last event (v1).
	LastSeq int64 `json:"last_seq"`
	// EventCount is the number of events in the thread (v1).
	EventCount int64 `json:"event_count"`
}
