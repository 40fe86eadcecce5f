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
}
