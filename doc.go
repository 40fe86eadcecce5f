// Package agentbridge holds the domain shared by the bridge server and the
// coordinator: events and their validation, threads, the typed error that
// every client sees, and the pure fold that turns a thread's events into its
// derived state.
//
// It imports only the standard library. Technology lives in subpackages:
// bridge (HTTP server and SQLite store), client (the HTTP client used by the
// CLI and the coordinator), coordinator (rules, adapters, state db) and
// launchd (service installation).
package agentbridge
