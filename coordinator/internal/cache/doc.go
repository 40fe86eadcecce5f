// Package cache holds the coordinator's in-memory caches of what it reads
// from the bridge: a bounded least-recently-used map (the threads' folded
// state), the last events of the threads met most recently (context
// windows) and the roster's presence kept from the global stream. Each is
// safe for concurrent use and knows nothing of the coordinator, so that
// its rules are tested on their own.
package cache
