package coordinator

import "time"

// SetACPPromptHook has f called with the time each session/prompt request
// is written to an ACP agent started from then on
// (BenchmarkACPTurnOverhead).
func SetACPPromptHook(c *Coordinator, f func(time.Time)) { c.acp.SetPromptHook(f) }
