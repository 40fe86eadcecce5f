package storetest

import (
	"context"
	"slices"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// searchStore is newStore's store as a SearchStore, or skips t.
func searchStore(t *testing.T, newStore Factory) (agentbridge.EventStore, agentbridge.SearchStore) {
	s := newStore(t, nil)
	ss, ok := s.(agentbridge.SearchStore)
	if !ok {
		t.Skip("the store keeps no search index")
	}
	return s, ss
}

// search runs q with the request's other fields from req, or fails t;
// it returns the contents of the hits, newest first.
func search(t *testing.T, ss agentbridge.SearchStore, q string, req agentbridge.SearchRequest) []string {
	t.Helper()
	pq, err := agentbridge.ParseSearchQuery(q)
	if err != nil {
		t.Fatalf("parse %q: %v", q, err)
	}
	req.Query = pq
	if req.Limit == 0 {
		req.Limit = 20
	}
	hits, err := ss.Search(context.Background(), req)
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	out := []string{}
	for i, h := range hits {
		if i > 0 && h.Event.GSeq >= hits[i-1].Event.GSeq {
			t.Fatalf("search %q: hits not newest first: %d then %d", q, hits[i-1].Event.GSeq, h.Event.GSeq)
		}
		out = append(out, h.Event.Text())
	}
	return out
}

// testSearch: words, phrases and prefixes find the events whose text has
// them, newest first; the thread, sender, type and time filters and the
// cursor narrow them; a control's values are not text; the threads a
// participant is invited to are listed.
func testSearch(t *testing.T, newStore Factory) {
	s, ss := searchStore(t, newStore)
	NewThread(t, s, "a")
	NewThread(t, s, "b.x")
	d1 := MustAppend(t, s, "a", Msg("user", "We decided to ship the parser on Friday."))
	MustAppend(t, s, "a", Msg("claude", "Decision noted: the parser ships Friday, tests first."))
	MustAppend(t, s, "b.x", Msg("codex", "Shipping GPT-4 prompts; the Parser is slow."))
	MustAppend(t, s, "b.x", Control("user", `{"invite":{"participant_id":"claude","profile":{"client":"claude","model":"m"}}}`))
	MustAppend(t, s, "b.x", Msg("user", "Café au lait, naïve résumé."))

	cases := []struct {
		q    string
		req  agentbridge.SearchRequest
		want []string
	}{
		{"parser", agentbridge.SearchRequest{}, []string{"Shipping GPT-4 prompts; the Parser is slow.", "Decision noted: the parser ships Friday, tests first.", "We decided to ship the parser on Friday."}},
		{"parser friday", agentbridge.SearchRequest{}, []string{"Decision noted: the parser ships Friday, tests first.", "We decided to ship the parser on Friday."}},
		{`"the parser ships"`, agentbridge.SearchRequest{}, []string{"Decision noted: the parser ships Friday, tests first."}},
		{`"parser friday"`, agentbridge.SearchRequest{}, []string{}},
		{"decid*", agentbridge.SearchRequest{}, []string{"We decided to ship the parser on Friday."}},
		{"deci*", agentbridge.SearchRequest{}, []string{"Decision noted: the parser ships Friday, tests first.", "We decided to ship the parser on Friday."}},
		{`"the pars"*`, agentbridge.SearchRequest{}, []string{"Shipping GPT-4 prompts; the Parser is slow.", "Decision noted: the parser ships Friday, tests first.", "We decided to ship the parser on Friday."}},
		{"gpt-4", agentbridge.SearchRequest{}, []string{"Shipping GPT-4 prompts; the Parser is slow."}},
		{"café", agentbridge.SearchRequest{}, []string{"Café au lait, naïve résumé."}},
		{"parser", agentbridge.SearchRequest{Threads: []string{"a"}}, []string{"Decision noted: the parser ships Friday, tests first.", "We decided to ship the parser on Friday."}},
		{"parser", agentbridge.SearchRequest{Threads: []string{"b.x", "nope"}}, []string{"Shipping GPT-4 prompts; the Parser is slow."}},
		{"parser", agentbridge.SearchRequest{Threads: []string{}}, []string{}},
		{"parser", agentbridge.SearchRequest{From: "user"}, []string{"We decided to ship the parser on Friday."}},
		{"parser", agentbridge.SearchRequest{From: "use"}, []string{}},
		{"parser", agentbridge.SearchRequest{Type: "control"}, []string{}},
		{"claude", agentbridge.SearchRequest{}, []string{}},
		{"parser", agentbridge.SearchRequest{Cursor: d1.GSeq + 1}, []string{"We decided to ship the parser on Friday."}},
		{"parser", agentbridge.SearchRequest{Limit: 1}, []string{"Shipping GPT-4 prompts; the Parser is slow."}},
		{"parser", agentbridge.SearchRequest{Before: d1.TS}, []string{}},
		{"parser", agentbridge.SearchRequest{After: d1.TS, Threads: []string{"a"}}, []string{"Decision noted: the parser ships Friday, tests first.", "We decided to ship the parser on Friday."}},
		{"thread", agentbridge.SearchRequest{}, []string{"thread b.x", "thread a"}},
	}
	for _, c := range cases {
		if got := search(t, ss, c.q, c.req); !slices.Equal(got, c.want) {
			t.Errorf("search %q %+v:\n got %q\nwant %q", c.q, c.req, got, c.want)
		}
	}
	ids, err := ss.ThreadsInvited(context.Background(), "claude")
	if err != nil || !slices.Equal(ids, []string{"b.x"}) {
		t.Errorf("threads claude is invited to: %v %v, want [b.x]", ids, err)
	}
	if ids, err := ss.ThreadsInvited(context.Background(), "codex"); err != nil || len(ids) != 0 {
		t.Errorf("threads codex is invited to: %v %v, want none", ids, err)
	}
}
