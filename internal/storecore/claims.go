package storecore

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Claims (contract 7.1): both stores keep one row per claim key and apply
// the same rules to it; the rules are decided here, from the row, the
// claimant's registration and the holder's, so that the stores differ only
// in their SQL and their transactions.

// ClaimColumns are the columns ScanClaim reads, in order, followed by the
// database's now in milliseconds since the epoch (each store's own
// expression).
const ClaimColumns = `id, thread, event, participant, round, notice, client, fallback_from, state, coordinator, instance, host,
	fence, interrupted_fence, created_ms, claimed_ms, expires_ms, due_ms`

// ClaimRow is a stored claim with what only the stores and the sweeper
// need: the fence its receipt was last interrupted at, its expiry and the
// database's now when it was read, in milliseconds since the epoch.
type ClaimRow struct {
	agentbridge.Claim
	InterruptedFence int64
	ExpiresMs, NowMs int64
	// CreatedMs is when the claim was made; DueMs when a waiting claim
	// may be taken (0: at once).
	CreatedMs, DueMs int64
}

// ScanClaim scans a ClaimColumns row followed by the database's now.
func ScanClaim(r Row) (ClaimRow, error) {
	var c ClaimRow
	var created, claimed, expires int64
	if err := r.Scan(&c.ID, &c.Thread, &c.Event, &c.Participant, &c.Round, &c.Notice, &c.Client, &c.FallbackFrom, &c.State,
		&c.Coordinator, &c.Instance, &c.Host, &c.Fence, &c.InterruptedFence, &created, &claimed, &expires, &c.DueMs, &c.NowMs); err != nil {
		return c, err
	}
	c.ExpiresMs, c.CreatedMs = expires, created
	if c.DueMs > 0 && c.State == agentbridge.ClaimWaiting {
		c.DueAt = formatMillis(c.DueMs)
	}
	c.CreatedAt = formatMillis(created)
	if claimed > 0 {
		c.ClaimedAt = formatMillis(claimed)
	}
	if expires > 0 && (c.State == agentbridge.ClaimWaiting || c.State == agentbridge.ClaimExpired) {
		c.ExpiresAt = formatMillis(expires)
	}
	return c, nil
}

func formatMillis(ms int64) string { return agentbridge.FormatTime(time.UnixMilli(ms)) }

// Registration finds id's registration in list.
func Registration(list []agentbridge.CoordinatorInfo, id string) (agentbridge.CoordinatorInfo, bool) {
	for _, c := range list {
		if c.ID == id {
			return c, true
		}
	}
	return agentbridge.CoordinatorInfo{}, false
}

// HolderLive reports whether the holder of c still holds a live
// registration: the same id and instance, heard from within its ttl.
func HolderLive(c agentbridge.Claim, list []agentbridge.CoordinatorInfo) bool {
	reg, ok := Registration(list, c.Coordinator)
	return ok && reg.Instance == c.Instance && reg.Live
}

// CheckClaimant refuses (not_registered) a claim whose coordinator id and
// instance hold no live registration in list, and returns the
// registration otherwise.
func CheckClaimant(req agentbridge.ClaimRequest, list []agentbridge.CoordinatorInfo) (agentbridge.CoordinatorInfo, error) {
	reg, ok := Registration(list, req.Coordinator)
	switch {
	case !ok:
		return reg, agentbridge.Errorf(agentbridge.ECodeNotRegistered, "Coordinator %q is not registered: register it (PUT /coordinators/%s) before it claims.", req.Coordinator, req.Coordinator)
	case reg.Instance != req.Instance:
		return reg, agentbridge.Errorf(agentbridge.ECodeNotRegistered, "Coordinator %q is registered by another process (instance %s on %s), not by instance %s: register again before claiming.", req.Coordinator, reg.Instance, reg.Host, agentbridge.Clip(req.Instance, agentbridge.QuoteRunes))
	case !reg.Live:
		return reg, agentbridge.Errorf(agentbridge.ECodeNotRegistered, "The registration of coordinator %q lapsed (no heartbeat for %d ms): register again before claiming.", req.Coordinator, reg.AgeMillis)
	}
	return reg, nil
}

// CheckServes refuses (403 forbidden_sender) a run claim that takes the
// run (not a waiting one) from claimant me whose registration serves
// neither its participant by name nor its client (the claim's, else the
// stored row's, nil when there is none) (contract 8.3): a claim it holds
// would keep the coordinators serving the participant from the run.
func CheckServes(req agentbridge.ClaimRequest, me agentbridge.CoordinatorInfo, row *ClaimRow) error {
	client := req.Client
	if client == "" && row != nil {
		client = row.Client
	}
	if !req.IsRun() || req.Wait || agentbridge.ServesParticipant(me.Agents, req.Participant, client) {
		return nil
	}
	return &agentbridge.Error{Code: agentbridge.ECodeForbiddenSender, Thread: req.Thread, Participant: req.Participant,
		Message: fmt.Sprintf("Coordinator %q does not serve %s: its registration lists neither that name nor an agent of client %q, so it may not claim its runs.",
			req.Coordinator, req.Participant, client)}
}

// ClaimAction is what a store does to a claim key's row.
type ClaimAction int

// The claim actions.
const (
	// ClaimKeep leaves the row as it is.
	ClaimKeep ClaimAction = iota
	// ClaimInsertWaiting inserts a waiting row (fence 0, no holder).
	ClaimInsertWaiting
	// ClaimInsertRunning inserts a running row held by the claimant at
	// fence 1.
	ClaimInsertRunning
	// ClaimTake makes the claimant the holder at fence+1, running.
	ClaimTake
)

// DecideClaim applies the claim rules to the key's row (nil: none) for
// req, whose claimant holds a live registration; list is every
// registration, for the holder's liveness. granted is the answer's, and
// previousHost the lapsed holder's host on a takeover.
func DecideClaim(req agentbridge.ClaimRequest, row *ClaimRow, list []agentbridge.CoordinatorInfo) (act ClaimAction, granted bool, previousHost string) {
	if row == nil {
		if req.Wait {
			return ClaimInsertWaiting, false, ""
		}
		return ClaimInsertRunning, true, ""
	}
	switch row.State {
	case agentbridge.ClaimWaiting:
		if req.Wait || NotDue(*row) {
			return ClaimKeep, false, ""
		}
		return ClaimTake, true, ""
	case agentbridge.ClaimRunning:
		switch {
		case row.Coordinator == req.Coordinator && row.Instance == req.Instance:
			return ClaimKeep, true, ""
		case row.Coordinator == req.Coordinator:
			// The same coordinator restarted: its old process's run is
			// gone with it.
			return ClaimTake, true, row.Host
		case HolderLive(row.Claim, list):
			return ClaimKeep, false, ""
		}
		return ClaimTake, true, row.Host
	}
	return ClaimKeep, false, ""
}

// Claimable filters rows (waiting and running claims, oldest first) to
// those coordinator may take now (agentbridge.ClaimStore.Claimable).
func Claimable(rows []ClaimRow, list []agentbridge.CoordinatorInfo, coordinator string) []agentbridge.Claim {
	reg, ok := Registration(list, coordinator)
	if !ok || !reg.Live {
		return []agentbridge.Claim{}
	}
	out := []agentbridge.Claim{}
	for _, c := range rows {
		switch c.State {
		case agentbridge.ClaimWaiting:
			if c.NowMs >= c.ExpiresMs || NotDue(c) {
				continue
			}
		case agentbridge.ClaimRunning:
			if HolderLive(c.Claim, list) {
				continue
			}
		default:
			continue
		}
		if !c.IsRun() || agentbridge.ServesParticipant(reg.Agents, c.Participant, c.Client) {
			out = append(out, c.Claim)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Due filters rows (waiting and running claims) to those the sweeper acts
// on (agentbridge.ClaimStore.DueClaims).
func Due(rows []ClaimRow, list []agentbridge.CoordinatorInfo) []agentbridge.Claim {
	out := []agentbridge.Claim{}
	for _, c := range rows {
		if InterruptDue(c, list) || ExpireDue(c) {
			out = append(out, c.Claim)
		}
	}
	return out
}

// InterruptDue reports whether c is a running run claim whose holder
// lapsed and whose receipt was not yet interrupted at its fence.
func InterruptDue(c ClaimRow, list []agentbridge.CoordinatorInfo) bool {
	return c.State == agentbridge.ClaimRunning && c.IsRun() && c.InterruptedFence < c.Fence && !HolderLive(c.Claim, list)
}

// ExpireDue reports whether c is a waiting claim past its expiry.
func ExpireDue(c ClaimRow) bool {
	return c.State == agentbridge.ClaimWaiting && c.NowMs >= c.ExpiresMs
}

// InterruptedReceipt is the receipt the sweeper writes for c, or false
// when its pair's receipt old (found says whether there is one) already
// ended: a run whose reply or error was recorded is not interrupted.
func InterruptedReceipt(c agentbridge.Claim, old agentbridge.Receipt, found bool) (agentbridge.ReceiptInput, bool) {
	if found && old.State != agentbridge.ReceiptQueued && old.State != agentbridge.ReceiptRunning {
		return agentbridge.ReceiptInput{}, false
	}
	return agentbridge.ReceiptInput{
		Thread: c.Thread, Event: c.Event, Participant: c.Participant, From: agentbridge.ClaimSender,
		State: agentbridge.ReceiptInterrupted, Reason: agentbridge.InterruptedReason(c.Host),
	}, true
}

// ExpiredMessage is the append of the bridge's error message for expired
// run claim c, which waited ttl, with waited messages of its (thread,
// participant).
func ExpiredMessage(c agentbridge.Claim, ttl time.Duration, waited int) agentbridge.AppendRequest {
	return agentbridge.AppendRequest{
		Thread: c.Thread,
		Input: agentbridge.EventInput{
			Type: agentbridge.TypeMessage, From: agentbridge.ClaimSender,
			Content: mustJSON(expiredNotice(c, ttl, waited)),
			Meta: agentbridge.Meta{ReplyTo: c.Event, Tags: []string{"error"},
				Extra: map[string]json.RawMessage{"participant": mustJSON(c.Participant)}},
		},
		// One message per claim, even when two bridges expire it.
		IdempotencyKey: "claim-expired/" + c.Thread + "/" + c.Event + "/" + c.Participant,
	}
}

// FailedReceipt is the failed receipt of expired run claim c.
func FailedReceipt(c agentbridge.Claim, ttl time.Duration) agentbridge.ReceiptInput {
	reason := "nobody served " + c.Participant + " within " + ttl.String()
	if due, ok := limitDue(c); ok {
		reason = "waited for " + c.Participant + "'s limit until " + due.UTC().Format("Jan 2 15:04 MST") + "; not taken up again within " + ttl.String()
	}
	return agentbridge.ReceiptInput{
		Thread: c.Thread, Event: c.Event, Participant: c.Participant, From: agentbridge.ClaimSender,
		State: agentbridge.ReceiptFailed, Reason: reason,
	}
}

// expiredNotice words why run claim c expired: nobody served its
// participant, or (a claim put back to wait for a usage limit) nobody took
// it up again once the limit reset.
func expiredNotice(c agentbridge.Claim, ttl time.Duration, waited int) string {
	if due, ok := limitDue(c); ok {
		return agentbridge.LimitExpiredNotice(c.Participant, due, ttl)
	}
	return agentbridge.ExpiredNotice(c.Participant, ttl, waited)
}

// limitDue is when c's participant's usage limit was to reset, for a
// claim that waited for it.
func limitDue(c agentbridge.Claim) (time.Time, bool) {
	if c.DueAt == "" {
		return time.Time{}, false
	}
	t, err := agentbridge.ParseTime(c.DueAt)
	return t, err == nil
}

// WaitingReceipt is the queued receipt of a new waiting run claim.
func WaitingReceipt(req agentbridge.ClaimRequest) agentbridge.ReceiptInput {
	return agentbridge.ReceiptInput{
		Thread: req.Thread, Event: req.Event, Participant: req.Participant, From: agentbridge.ClaimSender,
		State: agentbridge.ReceiptQueued, Reason: agentbridge.WaitingReason(req.Participant),
	}
}

// mustJSON is s as a JSON string (encoding a string cannot fail).
func mustJSON(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// CollectServed reads rows of (name, client), the agents registrations
// ever listed, into a map of name to client.
func CollectServed(rows Rows) (map[string]string, error) {
	out := map[string]string{}
	for rows.Next() {
		var name, client string
		if err := rows.Scan(&name, &client); err != nil {
			return nil, fmt.Errorf("scan served agent: %w", err)
		}
		out[name] = client
	}
	return out, rows.Err()
}
