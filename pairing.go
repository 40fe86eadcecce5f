package agentbridge

import (
	"context"
	"time"
)

// PairStore keeps the pairing codes waiting to be used (contract 7.2) in
// the bridge's store, so that a link one bridge made works through any
// bridge on the same database. Codes are kept by their SHA-256, never in
// clear.
type PairStore interface {
	// AddPairCode stores the code whose hash is hash, for a device named
	// name, usable until expires. The codes expired at now are deleted
	// first; ok is false, and nothing stored, when limit codes are still
	// waiting.
	AddPairCode(ctx context.Context, hash []byte, name string, now, expires time.Time, limit int) (ok bool, err error)
	// TakePairCode deletes the code whose hash is hash and returns its
	// device name; ok is false when there was none, or it had expired at
	// now. Of two callers taking one code, at most one gets it.
	TakePairCode(ctx context.Context, hash []byte, now time.Time) (name string, ok bool, err error)
}
