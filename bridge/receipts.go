package bridge

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// receiptLogSize is how many recent receipt changes the hub keeps for
// stream subscribers. A subscriber that falls further behind skips the
// oldest: a receipt is the latest state of its pair, and GET receipts
// gives the whole picture again.
const receiptLogSize = 1024

// newReceiptHub returns the ring of the last receipt changes that wakes
// stream subscribers; the receipts themselves live in the store.
func newReceiptHub() *ringLog[agentbridge.Receipt] {
	return newRingLog[agentbridge.Receipt](receiptLogSize)
}

// receiptsOf keeps the receipts of thread ("" = every thread).
func receiptsOf(thread string) func(agentbridge.Receipt) bool {
	return func(r agentbridge.Receipt) bool { return thread == "" || r.Thread == thread }
}

// receiptFields are the fields a receipt body may carry.
var receiptFields = []string{"from", "state", "reason", "invocation", "reply"}

// parseReceiptBody decodes and validates a PUT receipt body for the pair
// named by thread, event and participant (from the path).
func parseReceiptBody(body []byte, thread, event, participant string) (agentbridge.ReceiptInput, error) {
	var in agentbridge.ReceiptInput
	if err := httpjson.DecodeObject(body, &in, receiptFields); err != nil {
		return agentbridge.ReceiptInput{}, err
	}
	in.Thread, in.Event, in.Participant = thread, event, participant
	if err := in.Validate(); err != nil {
		return agentbridge.ReceiptInput{}, err
	}
	return in, nil
}

// receiptAnswer is the answer of PUT receipts.
type receiptAnswer struct {
	Receipt agentbridge.Receipt `json:"receipt"`
	Changed bool                `json:"changed"`
}

func (s *Server) handleReceiptPut(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	in, err := parseReceiptBody(body, chi.URLParam(r, "id"), chi.URLParam(r, "event"), chi.URLParam(r, "participant"))
	if err != nil {
		return err
	}
	if err := s.mayWriteReceipt(r.Context(), credential(r), in); err != nil {
		return err
	}
	if in.Fence, err = fenceOf(r); err != nil {
		return err
	}
	rc, changed, err := s.store.PutReceipt(r.Context(), in)
	if err != nil {
		return storeErr("put receipt", err)
	}
	if changed {
		s.receiptHub.add(rc)
	}
	rc.Thread = ""
	httpjson.Write(w, http.StatusOK, receiptAnswer{Receipt: rc, Changed: changed})
	return nil
}

// receiptsPage is the answer of GET receipts.
type receiptsPage struct {
	Receipts []agentbridge.Receipt `json:"receipts"`
}

func (s *Server) handleReceiptsGet(w http.ResponseWriter, r *http.Request) error {
	// event names a single event, from_event a page start: together one of
	// them would be ignored (queryReceipts makes them exclusive).
	p, err := parseQuery(r, queryReceipts)
	if err != nil {
		return err
	}
	q := agentbridge.ReceiptsQuery{
		Thread: chi.URLParam(r, "id"), Event: p.str("event"), FromEvent: p.str("from_event"),
		Limit: int(p.int("limit", agentbridge.MaxEventsLimit)),
	}
	list, err := s.store.Receipts(r.Context(), q)
	if err != nil {
		return storeErr("list receipts", err)
	}
	httpjson.Write(w, http.StatusOK, receiptsPage{Receipts: list})
	return nil
}

// receipt writes one receipt change as "event: receipt" (no id: receipts
// are not events, and a reconnecting client reloads them with GET).
func (s *sse) receipt(r agentbridge.Receipt) error {
	s.arm()
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode receipt: %w", err)
	}
	_, err = fmt.Fprintf(s.w, "event: receipt\ndata: %s\n\n", b)
	return err
}
