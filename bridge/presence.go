package bridge

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// presenceLogSize is how many recent presence changes the hub keeps for
// global-stream subscribers; one that falls further behind skips the oldest
// (presence is ephemeral: the latest report is what matters).
const presenceLogSize = 256

// The presence limits (contract 7.3; docs/security.md's table). Presence
// lives in memory and any client may report it, so each of them bounds
// what one client can make the bridge hold: a real deployment has a few
// agents with a few hundred bytes of details each.
const (
	// MaxPresenceDetails is the largest details object, in bytes as sent.
	MaxPresenceDetails = 4 << 10
	// MaxPresencePerThread is how many participants one thread holds
	// presence for.
	MaxPresencePerThread = 256
	// MaxPresencePerSender is how many threads one participant holds
	// presence in at once: above the 1,024 threads the coordinator
	// reports its agents available in (the coordinator's maxCachedThreads).
	MaxPresencePerSender = 2048
)

// presenceHub holds presence in memory, per thread, and keeps its changes
// in a ringLog that wakes global-stream subscribers.
type presenceHub struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	threads map[string]map[string]presenceEntry
	// perSender counts each participant's entries across threads, for
	// MaxPresencePerSender.
	perSender map[string]int
	changes   *ringLog[agentbridge.Presence]
}

type presenceEntry struct {
	state   string
	details json.RawMessage
	at      time.Time
}

func newPresenceHub(ttl time.Duration, now func() time.Time) *presenceHub {
	return &presenceHub{ttl: ttl, now: now, threads: map[string]map[string]presenceEntry{}, perSender: map[string]int{}, changes: newRingLog[agentbridge.Presence](presenceLogSize)}
}

// set records a report and wakes subscribers. It forgets entries that have
// been stale for ten TTLs (of the thread, and of every thread when the
// sender's limit is reached), so memory stays bounded by the active participants; a new
// entry past MaxPresencePerThread or MaxPresencePerSender is refused
// (too_many_presence) and nothing changes.
func (p *presenceHub) set(thread string, in agentbridge.PresenceInput) (agentbridge.Presence, error) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forget(thread, now)
	m := p.threads[thread]
	if _, ok := m[in.From]; !ok {
		if p.perSender[in.From] >= MaxPresencePerSender {
			// The sender's old entries may be in any thread (this
			// thread's were forgotten above).
			for id := range p.threads {
				p.forget(id, now)
			}
			m = p.threads[thread]
		}
		if err := p.admit(thread, m, in.From); err != nil {
			return agentbridge.Presence{}, err
		}
	}
	if m == nil {
		m = map[string]presenceEntry{}
		p.threads[thread] = m
	}
	if _, ok := m[in.From]; !ok {
		p.perSender[in.From]++
	}
	e := presenceEntry{state: in.State, details: in.Details, at: now}
	if in.Details == nil {
		// A report without details keeps the last ones, as the original
		// did: its UI shows client and model from them.
		e.details = m[in.From].details
	} else if isJSONNull(in.Details) {
		e.details = nil
	}
	m[in.From] = e
	pr := p.view(in.From, e, now)
	pr.Thread = thread
	p.changes.add(pr)
	return pr, nil
}

// forget drops thread's entries that have been stale for ten TTLs, and the
// thread's map when it empties.
func (p *presenceHub) forget(thread string, now time.Time) {
	m := p.threads[thread]
	for id, e := range m {
		if now.Sub(e.at) > 10*p.ttl {
			delete(m, id)
			if p.perSender[id]--; p.perSender[id] <= 0 {
				delete(p.perSender, id)
			}
		}
	}
	if m != nil && len(m) == 0 {
		delete(p.threads, thread)
	}
}

// admit refuses a new entry of from in thread (whose entries are m) past
// the limits.
func (p *presenceHub) admit(thread string, m map[string]presenceEntry, from string) error {
	forgotten := fmt.Sprintf("an entry is forgotten %s after its last report", 10*p.ttl)
	switch {
	case len(m) >= MaxPresencePerThread:
		return &agentbridge.Error{
			Code: agentbridge.ECodeTooManyPresence, Thread: thread, Participant: from,
			Message: fmt.Sprintf("Thread %q already holds presence for %d participants, the most it keeps; %s.", thread, MaxPresencePerThread, forgotten),
		}
	case p.perSender[from] >= MaxPresencePerSender:
		return &agentbridge.Error{
			Code: agentbridge.ECodeTooManyPresence, Thread: thread, Participant: from,
			Message: fmt.Sprintf("%s already has presence in %d threads, the most one participant may; %s.", from, MaxPresencePerSender, forgotten),
		}
	}
	return nil
}

func (p *presenceHub) view(id string, e presenceEntry, now time.Time) agentbridge.Presence {
	return agentbridge.Presence{ID: id, State: e.state, UpdatedAt: agentbridge.FormatTime(e.at), Stale: now.Sub(e.at) > p.ttl, Details: e.details}
}

// list returns a thread's presence sorted by participant id.
func (p *presenceHub) list(thread string) []agentbridge.Presence {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]agentbridge.Presence, 0, len(p.threads[thread]))
	for id, e := range p.threads[thread] {
		out = append(out, p.view(id, e, now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// presenceAnswer is the answer of GET /threads/{id}/presence.
type presenceAnswer struct {
	Thread       string                 `json:"thread"`
	TTLSeconds   int                    `json:"ttl_seconds"`
	Participants []agentbridge.Presence `json:"participants"`
}

func (s *Server) handlePresenceGet(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r, queryNone); err != nil {
		return err
	}
	id := chi.URLParam(r, "id")
	if _, err := s.store.Thread(r.Context(), id); err != nil {
		return storeErr("presence thread", err)
	}
	httpjson.Write(w, http.StatusOK, presenceAnswer{Thread: id, TTLSeconds: int(s.opts.PresenceTTL / time.Second), Participants: s.presence.list(id)})
	return nil
}

// presenceBody is the body of POST /threads/{id}/presence. Details, when
// sent, must be an object (null clears them); absent, they stay as they were.
type presenceBody struct {
	From    *string         `json:"from"`
	State   *string         `json:"state"`
	Details json.RawMessage `json:"details"`
}

func (s *Server) handlePresencePost(w http.ResponseWriter, r *http.Request) error {
	var body presenceBody
	if err := s.decodeStrict(w, r, &body, []string{"from", "state", "details"}, false); err != nil {
		return err
	}
	var in agentbridge.PresenceInput
	switch {
	case body.From == nil:
		return agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "from", "The field \"from\" is required: say whose presence this is.")
	case !agentbridge.ParticipantIDPattern.MatchString(*body.From):
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "from", "The participant id %q is not valid: use 1 to 128 letters, digits or . _ @ : -, starting with a letter or digit.", agentbridge.Clip(*body.From, 41))
	case body.State == nil:
		return agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "state", "The field \"state\" is required: one of listening, thinking, typing, idle, offline.")
	case !agentbridge.ValidPresenceState(*body.State):
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "state", "The presence state %q is not one of listening, thinking, typing, idle, offline.", agentbridge.Clip(*body.State, 41))
	case body.Details != nil && !isJSONNull(body.Details) && !isJSONObject(body.Details):
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "details", "Presence details must be a JSON object, such as {\"client\": \"codex\", \"model\": \"gpt-5\"}.")
	case len(body.Details) > MaxPresenceDetails:
		return agentbridge.FieldErrorf(agentbridge.ECodeDetailsTooLarge, "details", "Presence details are %d bytes, more than the %d a report may carry; send a few short fields (client, model, a note).", len(body.Details), MaxPresenceDetails)
	}
	in.From, in.State, in.Details = *body.From, *body.State, body.Details
	id := chi.URLParam(r, "id")
	if err := s.mayWriteAs(r.Context(), credential(r), id, in.From); err != nil {
		return err
	}
	if _, err := s.store.Thread(r.Context(), id); err != nil {
		return storeErr("presence thread", err)
	}
	if err := s.checkPresenceFence(r); err != nil {
		return err
	}
	pr, err := s.presence.set(id, in)
	if err != nil {
		return err
	}
	httpjson.Write(w, http.StatusOK, map[string]any{"ok": true, "presence": pr})
	return nil
}

func isJSONNull(b json.RawMessage) bool { return string(bytes.TrimSpace(b)) == "null" }

func isJSONObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}
