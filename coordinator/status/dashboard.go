package status

import (
	"context"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/httpjson"
)

// The runs dashboard (docs/runs.md): plain HTML, CSS and one script,
// embedded like the bridge's UI, served by the status server at / and
// polling its JSON endpoints (GET /runs, GET /usage, GET /invocations/{id})
// once a second.

//go:embed dashboard
var dashboardFiles embed.FS

// dashboardCSP allows only the dashboard's own script, style and requests.
const dashboardCSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; object-src 'none'"

// Excerpts of trigger messages shown in the runs table.
const (
	excerptRunes = 120
	// excerptCache bounds the cache of excerpts fetched from the bridge;
	// past it the cache starts afresh (the next look refetches a page).
	excerptCache = 4096
	// excerptTimeout bounds the fetches of one GET /runs: the dashboard's
	// answer must not wait for a slow bridge, it shows no excerpt instead.
	excerptTimeout = 2 * time.Second
)

// excerpts caches trigger excerpts by event id: events never change, so an
// entry never goes stale. The ledger does not store them (a message's text
// belongs to the bridge; the ledger keeps ids).
type excerpts struct {
	mu sync.Mutex
	m  map[string]string
	// names caches the names of threads the coordinator has no state
	// for (words.go); a rename shows once the thread speaks.
	names map[string]string
}

// mountDashboard adds the dashboard's routes to the status server's mux.
func (s *Server) mountDashboard(mux *http.ServeMux) {
	sub, err := fs.Sub(dashboardFiles, "dashboard")
	if err != nil {
		panic("status: embedded dashboard missing: " + err.Error())
	}
	serve := func(w http.ResponseWriter, r *http.Request, name string) {
		b, err := fs.ReadFile(sub, name)
		if err != nil {
			httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeNotFound, "There is no dashboard file %s.", r.URL.Path))
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", dashboardCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		switch path.Ext(name) {
		case ".html":
			h.Set("Content-Type", "text/html; charset=utf-8")
		case ".js":
			h.Set("Content-Type", "text/javascript; charset=utf-8")
		case ".css":
			h.Set("Content-Type", "text/css; charset=utf-8")
		}
		_, _ = w.Write(b)
	}
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { serve(w, r, "index.html") })
	mux.HandleFunc("GET /dashboard/{file}", func(w http.ResponseWriter, r *http.Request) { serve(w, r, r.PathValue("file")) })
	mux.HandleFunc("GET /runs", s.handleRuns)
	mux.HandleFunc("GET /usage", s.handleUsage)
}

// Run is one row of GET /runs: the invocation record plus the first
// characters of its trigger (as one line: a control in words) and its
// thread's name.
type Run struct {
	ledger.Invocation
	TriggerExcerpt string `json:"trigger_excerpt"`
	ThreadName     string `json:"thread_name"`
}

// RunsResponse is the body of GET /runs.
type RunsResponse struct {
	Runs []Run `json:"runs"`
	// Now is the status server's clock, so the page computes running
	// durations without trusting the browser's.
	Now string `json:"now"`
	// BridgeURL is the bridge the coordinator follows, so the page links
	// each run's thread to the bridge's UI.
	BridgeURL string `json:"bridge_url"`
}

// maxRuns caps /runs?limit=: each row also carries its trigger's excerpt.
const maxRuns = 1000

// handleRuns serves GET /runs?thread=&participant=&status=&limit=.
func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	f, ferr := invocationFilter(r.URL.Query(), maxRuns)
	if ferr != nil {
		httpjson.WriteError(w, ferr)
		return
	}
	invs, err := s.src.Ledger().Invocations(r.Context(), f)
	if err != nil {
		s.log.Error("list runs", "err", err)
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeInternal, "The runs could not be read."))
		return
	}
	out := RunsResponse{Runs: make([]Run, len(invs)), Now: agentbridge.FormatTime(time.Now().UTC()), BridgeURL: s.src.BridgeURL()}
	// One budget for every fetch of this answer: a bridge that hangs costs
	// the page excerpts, not 2 s per row.
	ctx, cancel := context.WithTimeout(r.Context(), excerptTimeout)
	defer cancel()
	for i, inv := range invs {
		out.Runs[i] = Run{Invocation: inv, TriggerExcerpt: s.excerpt(ctx, inv), ThreadName: s.runThreadName(ctx, inv.Thread)}
	}
	httpjson.Write(w, http.StatusOK, out)
}

// excerpt returns the start of an invocation's trigger, from the cache or
// the bridge; "" when the bridge cannot say (the next look tries again).
func (s *Server) excerpt(ctx context.Context, inv ledger.Invocation) string {
	s.excerpts.mu.Lock()
	text, ok := s.excerpts.m[inv.TriggerID]
	s.excerpts.mu.Unlock()
	if ok {
		return text
	}
	if ctx.Err() != nil {
		return ""
	}
	evs, err := s.src.Bridge().ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: inv.Thread, After: inv.TriggerSeq - 1, Limit: 1})
	if err != nil || len(evs) == 0 || evs[0].ID != inv.TriggerID {
		return ""
	}
	text = triggerLine(evs[0])
	if utf8.RuneCountInString(text) > excerptRunes {
		text = string([]rune(text)[:excerptRunes-1]) + "…"
	}
	s.excerpts.mu.Lock()
	if s.excerpts.m == nil || len(s.excerpts.m) >= excerptCache {
		s.excerpts.m = make(map[string]string)
	}
	s.excerpts.m[inv.TriggerID] = text
	s.excerpts.mu.Unlock()
	return text
}

// UsageResponse is the body of GET /usage: per participant, the runs,
// tokens and cost of the invocations queued since the start of today and
// over the last 7 days.
type UsageResponse struct {
	Today     []ledger.ParticipantUsage `json:"today"`
	Last7Days []ledger.ParticipantUsage `json:"last_7_days"`
	// TodaySince and WeekSince are the periods' starts.
	TodaySince string `json:"today_since"`
	WeekSince  string `json:"week_since"`
}

// handleUsage serves GET /usage[?tz_offset_min=N]. "Today" starts at
// midnight in the viewer's time zone when the page says its offset from
// UTC in minutes (JavaScript's -getTimezoneOffset()), else at midnight UTC;
// the last 7 days are today and the 6 days before.
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	off := 0
	if s := r.URL.Query().Get("tz_offset_min"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < -14*60 || n > 14*60 {
			httpjson.WriteError(w, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, "tz_offset_min",
				"tz_offset_min must be the time zone's offset from UTC in minutes, from -840 to 840."))
			return
		}
		off = n
	}
	zone := time.FixedZone("viewer", off*60)
	now := time.Now().In(zone)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, zone).UTC()
	week := today.AddDate(0, 0, -6)
	out := UsageResponse{TodaySince: agentbridge.FormatTime(today), WeekSince: agentbridge.FormatTime(week)}
	var err error
	if out.Today, err = s.src.Ledger().UsageSince(r.Context(), out.TodaySince); err == nil {
		out.Last7Days, err = s.src.Ledger().UsageSince(r.Context(), out.WeekSince)
	}
	if err != nil {
		s.log.Error("sum usage", "err", err)
		httpjson.WriteError(w, agentbridge.Errorf(agentbridge.ECodeInternal, "The usage could not be summed."))
		return
	}
	httpjson.Write(w, http.StatusOK, out)
}
