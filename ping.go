package agentbridge

// ServerInfo is the bridge's answer to GET /ping: that it lives, what it is,
// its version, and the participants it counts as humans (serve --humans).
// The humans are there so that a coordinator's human_ids, which must match
// them, can be checked from outside (agent-bridge doctor).
type ServerInfo struct {
	Status  string `json:"status"`
	Server  string `json:"server"`
	Version string `json:"version"`
	Humans  Humans `json:"humans"`
	// Epoch is the log's epoch, when the store keeps one (SQLite and
	// PostgreSQL do; nil from an older bridge).
	Epoch *LogEpoch `json:"epoch,omitempty"`
}

// LogEpoch names the history a bridge's log belongs to. Restoring a backup
// starts a new epoch whose Base is the backup's last gseq: the events up to
// Base are the ones the old log had, and those after it are new, even
// where their gseqs repeat old ones. A client whose cursor was kept in
// another epoch goes back to Base (docs/delivery.md, "After a restore").
type LogEpoch struct {
	// ID is random, and never 0.
	ID int64 `json:"id"`
	// Base is the gseq of the last event the log had when the epoch began.
	Base int64 `json:"base"`
}
