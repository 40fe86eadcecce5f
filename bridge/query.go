package bridge

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// The query parameters of every read endpoint and stream are parsed and
// checked here, once, against each endpoint's own list (docs/api.md,
// "Query parameters"): a parameter the endpoint does not take, one given
// twice, a malformed value, or two that exclude each other are refused
// with 400 invalid_field naming the parameter, before anything is read. An
// empty value counts as absent.

// paramKind is what a query parameter's value must be.
type paramKind int

const (
	// kindSeq is a seq or gseq cursor: a whole number, 0 or greater.
	kindSeq paramKind = iota
	// kindSeqFrom1 is a seq: a whole number, 1 or greater.
	kindSeqFrom1
	// kindCount is a number of events: 1 to MaxEventsLimit.
	kindCount
	// kindWait is a long-poll's wait in seconds: 0 to maxWait.
	kindWait
	// kindTime is a timestamp (RFC 3339), turned into the events' own
	// form so that comparing the two compares the times.
	kindTime
	// kindThreadID is a thread id, as a page cursor.
	kindThreadID
	// kindEventID is an event id.
	kindEventID
	// kindStatus is a suggestion status.
	kindStatus
	// kindFormat is a transcript format.
	kindFormat
	// kindFileName is an uploaded file's name: valid text of at most
	// 1,024 bytes (cleaned before it is kept).
	kindFileName
	// kindQuery is a search query: any text, parsed by the search itself
	// (bad_query).
	kindQuery
	// kindParticipant is a participant id (or a client).
	kindParticipant
	// kindType is an event type.
	kindType
	// kindPage is a page's length in a listing of tokens: 1 to
	// agentbridge.MaxTokensPage.
	kindPage
)

// endpointQuery is what one endpoint takes: its parameters and the groups
// of them of which at most one may be given.
type endpointQuery struct {
	params    map[string]paramKind
	exclusive [][]string
}

// The query of each read endpoint and stream; the table test
// (TestQueryParameters) goes through every one.
var (
	queryNone         = endpointQuery{}
	queryThreads      = endpointQuery{params: map[string]paramKind{"after": kindThreadID, "limit": kindCount}}
	queryThreadEvents = endpointQuery{params: map[string]paramKind{"after": kindSeq, "since": kindTime, "tail": kindCount, "until": kindSeqFrom1, "limit": kindCount}, exclusive: [][]string{{"after", "since", "tail"}}}
	queryThreadStream = endpointQuery{params: map[string]paramKind{"after": kindSeq, "since": kindTime}, exclusive: [][]string{{"after", "since"}}}
	queryState        = endpointQuery{params: map[string]paramKind{"at": kindSeqFrom1}}
	queryTranscript   = endpointQuery{params: map[string]paramKind{"format": kindFormat}}
	queryReceipts     = endpointQuery{params: map[string]paramKind{"event": kindEventID, "from_event": kindEventID, "limit": kindCount}, exclusive: [][]string{{"event", "from_event"}}}
	queryPoll         = endpointQuery{params: map[string]paramKind{"after": kindSeq, "wait": kindWait, "limit": kindCount}}
	queryGlobalStream = endpointQuery{params: map[string]paramKind{"after": kindSeq}}
	querySuggestions  = endpointQuery{params: map[string]paramKind{"status": kindStatus}}
	queryUpload       = endpointQuery{params: map[string]paramKind{"name": kindFileName}}
	querySearch       = endpointQuery{params: map[string]paramKind{"q": kindQuery, "thread": kindThreadID, "from": kindParticipant, "type": kindType,
		"before": kindTime, "after": kindTime, "limit": kindCount, "cursor": kindSeqFrom1}}
	querySchedules    = endpointQuery{params: map[string]paramKind{"thread": kindThreadID}}
	queryTokens       = endpointQuery{params: map[string]paramKind{"after": kindSeq, "limit": kindPage}}
	queryCoordinators = endpointQuery{params: map[string]paramKind{"served_ever": kindParticipant, "client": kindParticipant}}
)

// readQuery is an endpoint's checked query.
type readQuery struct {
	strs map[string]string
	ints map[string]int64
}

// has reports whether the parameter was given.
func (q readQuery) has(name string) bool {
	_, ok := q.strs[name]
	return ok
}

// int returns a number parameter, def when absent.
func (q readQuery) int(name string, def int64) int64 {
	if n, ok := q.ints[name]; ok {
		return n
	}
	return def
}

// str returns a parameter's value ("" when absent); a time is in the
// events' form.
func (q readQuery) str(name string) string { return q.strs[name] }

// parseQuery checks r's query against what the endpoint takes.
func parseQuery(r *http.Request, e endpointQuery) (readQuery, error) {
	q := readQuery{strs: map[string]string{}, ints: map[string]int64{}}
	for name, vals := range r.URL.Query() {
		kind, ok := e.params[name]
		if !ok {
			return q, unknownParam(name, e)
		}
		if len(vals) > 1 {
			return q, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "The parameter %q is given %d times; give it once.", name, len(vals))
		}
		v := vals[0]
		if v == "" {
			continue
		}
		s, n, err := checkParam(name, kind, v)
		if err != nil {
			return q, err
		}
		q.strs[name] = s
		if isNumber(kind) {
			q.ints[name] = n
		}
	}
	for _, group := range e.exclusive {
		var given []string
		for _, name := range group {
			if q.has(name) {
				given = append(given, name)
			}
		}
		if len(given) > 1 {
			return q, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, given[1],
				"The parameters %s cannot be used together: each says where to start. Give one of %s.",
				quoteJoin(given, " and "), quoteJoin(group, ", "))
		}
	}
	return q, nil
}

func isNumber(k paramKind) bool {
	return k == kindSeq || k == kindSeqFrom1 || k == kindCount || k == kindWait || k == kindPage
}

// checkParam checks one value; it returns the value to use (a time in the
// events' form) and, for a number, the number.
func checkParam(name string, kind paramKind, v string) (string, int64, error) {
	shown := agentbridge.Clip(v, 41)
	if isNumber(kind) {
		lo, hi := int64(0), int64(1)<<62
		switch kind {
		case kindSeqFrom1:
			lo = 1
		case kindCount:
			lo, hi = 1, agentbridge.MaxEventsLimit
		case kindWait:
			hi = maxWait
		case kindPage:
			lo, hi = 1, agentbridge.MaxTokensPage
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > hi {
			return "", 0, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "The parameter %q must be a whole number from %d to %d, not %q.", name, lo, hi, shown)
		}
		return v, n, nil
	}
	switch kind {
	case kindTime:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return "", 0, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "The parameter %q must be a time such as 2026-01-02T15:04:05Z (RFC 3339), not %q.", name, shown)
		}
		return agentbridge.FormatTime(t), 0, nil
	case kindThreadID:
		if !agentbridge.ThreadIDPattern.MatchString(v) {
			return "", 0, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "The parameter %q must be a thread id%s, not %q.", name, map[bool]string{true: " (the last of the previous page)"}[name == "after"], shown)
		}
	case kindEventID:
		if len(v) > agentbridge.MaxReceiptID {
			return "", 0, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "The parameter %q must be an event id, at most %d bytes.", name, agentbridge.MaxReceiptID)
		}
	case kindStatus:
		if !agentbridge.SuggestionStatusPattern.MatchString(v) {
			return "", 0, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "The parameter %q must be a status such as %q, not %q.", name, agentbridge.SuggestionPending, shown)
		}
	case kindParticipant:
		if !agentbridge.ParticipantIDPattern.MatchString(v) {
			return "", 0, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "The parameter %q must be a participant id or a client name, not %q.", name, shown)
		}
	case kindType:
		if !agentbridge.TypePattern.MatchString(v) {
			return "", 0, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "The parameter %q must be an event type such as \"message\", not %q.", name, shown)
		}
	case kindFormat:
		if !agentbridge.ValidTranscriptFormat(v) {
			return "", 0, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "The transcript format must be \"md\" or \"json\", not %q.", shown)
		}
	case kindFileName:
		if len(v) > 1024 || !utf8.ValidString(v) {
			return "", 0, agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "The parameter %q must be a file name, valid text of at most 1,024 bytes.", name)
		}
	}
	return v, 0, nil
}

// unknownParam is the error for a parameter the endpoint does not take.
func unknownParam(name string, e endpointQuery) error {
	if len(e.params) == 0 {
		return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "This endpoint takes no query parameters, and %q is not one.", agentbridge.Clip(name, 41))
	}
	names := make([]string, 0, len(e.params))
	for n := range e.params {
		names = append(names, n)
	}
	slices.Sort(names)
	return agentbridge.FieldErrorf(agentbridge.ECodeInvalidField, name, "There is no query parameter %q here; this endpoint takes %s.", agentbridge.Clip(name, 41), quoteJoin(names, ", "))
}

// quoteJoin quotes each name and joins them with sep.
func quoteJoin(names []string, sep string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, sep)
}
