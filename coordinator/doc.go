// Package coordinator is the daemon that turns thread events into agent
// invocations. It follows the bridge's global event stream, folds each
// thread's derived state, decides whom to invoke with the pure trigger rules
// of rules.Decide (package coordinator/rules), runs the configured adapters
// and posts their replies.
//
// The package is split into a pure core and an effectful shell. The core —
// the config (coordinator/config), the rules (coordinator/rules), and an
// invocation's buildPayload and planOutcome — does no I/O and is
// table-tested and fuzzed; a rules.Decision records, for every event, the
// rule that matched, who was invoked and why every other candidate was not.
// The shell (the follow loop, the scheduler, gather and the runs, the ledger
// in coordinator/ledger) carries those decisions out, and the Watcher swaps in a new Config when the
// file changes on disk. The status API and runs dashboard are a package of
// their own, coordinator/status, which reads the coordinator through
// status.Source.
package coordinator
