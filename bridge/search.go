package bridge

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"strconv"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/schedule"
	"github.com/agent-bridge/agent-bridge/internal/httpguard"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// Search and schedules (contract 8.6): GET /search over every thread the
// credential may read, GET /schedules with each schedule's next due time,
// and the wake-up of the scheduler when a schedule control is stored here.

// handleSearch answers GET /search: the matches newest first, each with a
// snippet around its matches, and the cursor of the next page.
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) error {
	ss := s.store
	p, err := parseQuery(r, querySearch)
	if err != nil {
		return err
	}
	if !p.has("q") {
		return agentbridge.FieldErrorf(agentbridge.ECodeMissingField, "q", "Say what to search for: ?q=words, a \"phrase\" or a prefix such as decid*.")
	}
	query, err := agentbridge.ParseSearchQuery(p.str("q"))
	if err != nil {
		return err
	}
	limit := int(p.int("limit", agentbridge.DefaultSearchLimit))
	if limit > agentbridge.MaxSearchLimit {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "limit", "The parameter \"limit\" must be at most %d, not %d.", agentbridge.MaxSearchLimit, limit)
	}
	threads, err := s.searchableThreads(r.Context(), credential(r), p.str("thread"))
	if err != nil {
		return err
	}
	req := agentbridge.SearchRequest{Query: query, Threads: threads, From: p.str("from"), Type: p.str("type"),
		After: p.str("after"), Before: p.str("before"), Cursor: p.int("cursor", 0), Limit: limit + 1}
	hits, err := ss.Search(r.Context(), req)
	if err != nil {
		return storeErr("search", err)
	}
	page := agentbridge.SearchPage{Results: []agentbridge.SearchResult{}}
	if len(hits) > limit {
		hits = hits[:limit]
		page.Next = strconv.FormatInt(hits[limit-1].Event.GSeq, 10)
	}
	names := map[string]string{}
	for _, h := range hits {
		name, seen := names[h.Event.Thread]
		if !seen {
			if th, err := s.store.Thread(r.Context(), h.Event.Thread); err == nil {
				name = th.Name
			}
			names[h.Event.Thread] = name
		}
		text := agentbridge.SearchText(h.Event)
		snippet, marks := agentbridge.Snippet(text, query)
		page.Results = append(page.Results, agentbridge.SearchResult{Thread: h.Event.Thread, ThreadName: name,
			Event: h.Event, Snippet: snippet, Marks: marks, Rank: agentbridge.SearchRank(text, query)})
	}
	httpjson.Write(w, http.StatusOK, page)
	return nil
}

// searchableThreads are the threads cred may search (nil for all), within
// the thread filter when one is given: an agent token reads its own thread
// and searches the threads its participant is invited to as well (the
// threads whose messages its runs were given); every other credential
// reads every thread. A thread filter outside them is refused, as reading
// that thread would be.
func (s *Server) searchableThreads(ctx context.Context, cred httpguard.Credential, thread string) ([]string, error) {
	if cred.Scope != agentbridge.ScopeAgent {
		if thread != "" {
			return []string{thread}, nil
		}
		return nil, nil
	}
	ids, err := s.store.ThreadsInvited(ctx, cred.Participant)
	if err != nil {
		return nil, storeErr("threads invited", err)
	}
	if !slices.Contains(ids, cred.Thread) {
		ids = append(ids, cred.Thread)
	}
	if thread == "" {
		return ids, nil
	}
	if !slices.Contains(ids, thread) {
		return nil, forbiddenThread(cred, thread)
	}
	return []string{thread}, nil
}

// schedulesPage is the answer of GET /schedules.
type schedulesPage struct {
	Schedules []agentbridge.Schedule `json:"schedules"`
}

// handleSchedules answers GET /schedules: every schedule (of one thread
// with ?thread), each with its next due time.
func (s *Server) handleSchedules(w http.ResponseWriter, r *http.Request) error {
	ss := s.store
	p, err := parseQuery(r, querySchedules)
	if err != nil {
		return err
	}
	thread := p.str("thread")
	if thread != "" {
		if _, err := s.store.Thread(r.Context(), thread); err != nil {
			return storeErr("thread", err)
		}
	}
	list, err := ss.Schedules(r.Context(), thread)
	if err != nil {
		return storeErr("schedules", err)
	}
	now := s.scheduleClock().Now()
	for i := range list {
		list[i].Next = schedule.NextOf(list[i], now)
	}
	if list == nil {
		list = []agentbridge.Schedule{}
	}
	httpjson.Write(w, http.StatusOK, schedulesPage{Schedules: list})
	return nil
}

// scheduleClock is the schedules' time.
func (s *Server) scheduleClock() schedule.Clock {
	if s.opts.ScheduleClock != nil {
		return s.opts.ScheduleClock
	}
	return schedule.WallClock{}
}

// scheduleChanged wakes the scheduler after a control that may have set
// or removed a schedule: found without parsing the control again (a
// spurious wake-up only reads the schedules once more).
func (s *Server) scheduleChanged(e agentbridge.Event, ignored *agentbridge.Ignored) {
	if e.Type == agentbridge.TypeControl && ignored == nil && bytes.Contains(e.Content, []byte(`schedule`)) {
		s.sched.Wake()
	}
}
