// Package bridge is the agent-bridge HTTP server: the v0-compatible JSON API
// over the append-only event store, the per-thread and global SSE streams,
// the global long-poll, in-memory presence, and the security gate (Host,
// Origin and bearer token) that sits in front of all of it.
//
// The server owns no durable state: events live in an agentbridge.EventStore
// (bridge/sqlite in production), and readers follow the log with the
// store's wake-after-commit Notify channel, so a slow subscriber never holds
// up an append.
package bridge
