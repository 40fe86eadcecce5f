package sqlite

import (
	"context"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/storecore"
)

// PutReceipt stores in as its pair's latest receipt through the writer
// goroutine, so that it commits in order with the appends it refers to
// (a receipt for an event appended a moment ago finds it) and never races
// another write for the file.
func (s *Store) PutReceipt(ctx context.Context, in agentbridge.ReceiptInput) (_ agentbridge.Receipt, _ bool, err error) {
	defer s.GuardWrite(time.Now(), &err)
	if err := storecore.CheckReceipt(in); err != nil {
		return agentbridge.Receipt{}, false, err
	}
	r := s.newRequest(ctx)
	r.receipt = &in
	resp := s.submit(ctx, r)
	if resp.err != nil {
		return agentbridge.Receipt{}, false, resp.err
	}
	return resp.rcpt, resp.changed, nil
}

// putReceipt runs inside a group commit (storecore.PutReceiptIn): a
// refusal comes back in the response and writes nothing; an error fails
// the batch.
func (s *Store) putReceipt(ctx context.Context, b *batch, in agentbridge.ReceiptInput) (response, error) {
	if _, found, err := s.headOf(ctx, b, in.Thread); err != nil || !found {
		if err == nil {
			return response{err: agentbridge.ThreadNotFound(in.Thread), isReceipt: true}, nil
		}
		return response{}, err
	}
	rc, changed, err := s.PutReceiptIn(ctx, storecore.SQLConn(s.w.conn), in)
	if refusal := storecore.Refusal(err); refusal != nil {
		return response{err: refusal, isReceipt: true}, nil
	}
	return response{rcpt: rc, changed: changed, isReceipt: true}, err
}

// WatchReceipts registers nothing (agentbridge.ReceiptWatcher): only this
// process writes the file, so no receipt is stored elsewhere.
func (s *Store) WatchReceipts(func(agentbridge.Receipt)) {}
