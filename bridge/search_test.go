package bridge

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// searchAs runs GET /search?q=… with the token tok ("" for the server's
// own) and extra parameters, and decodes a 200 answer.
func (ts *testServer) searchAs(tok, q, extra string) (answer, agentbridge.SearchPage) {
	ts.t.Helper()
	c := ts
	if tok != "" {
		c = ts.as(tok)
	}
	a := c.do("GET", "/search?q="+url.QueryEscape(q)+extra, "")
	var p agentbridge.SearchPage
	if a.status == 200 {
		if err := json.Unmarshal(a.body, &p); err != nil {
			ts.t.Fatalf("decode search: %v: %s", err, a.body)
		}
	}
	return a, p
}

// TestSearchEndpoint: GET /search finds words with a snippet marking them
// and the thread's name, pages newest first through next, and filters by
// thread and sender; a query it cannot parse is 400 bad_query with a
// sentence, and a limit over 100 is refused; an agent token sees only the
// hits of its thread and of the threads its participant is invited to,
// and is refused a thread filter outside them; a read token sees all.
func TestSearchEndpoint(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	for _, id := range []string{"a", "b", "c"} {
		ts.newThread(id)
	}
	for i := range 5 {
		ts.post("a", "user", fmt.Sprintf("Deploy plan %d: we decided to ship on Friday", i))
	}
	ts.post("b", "codex", "The deploy failed on Friday")
	ts.post("c", "user", "Secret deploy notes")
	ts.must(200, "POST", "/threads/b/events", `{"type":"control","from":"user","content":{"invite":{"participant_id":"claude","profile":{"client":"claude","model":"m"}}}}`)

	a, p := ts.searchAs("", "deploy friday", "&limit=3")
	if a.status != 200 || len(p.Results) != 3 || p.Next == "" {
		t.Fatalf("first page: %d %s", a.status, a.body)
	}
	r := p.Results[0]
	if r.Thread != "b" || r.ThreadName != "thread b" || r.Event.From != "codex" || r.Snippet != "The deploy failed on Friday" ||
		fmt.Sprint(r.Marks) != "[[4 10] [21 27]]" || r.Rank <= 0 {
		t.Fatalf("first result: %+v", r)
	}
	_, p2 := ts.searchAs("", "deploy friday", "&limit=3&cursor="+p.Next)
	if len(p2.Results) != 3 || p2.Next != "" || p2.Results[0].Event.GSeq >= p.Results[2].Event.GSeq {
		t.Fatalf("second page: %+v", p2)
	}
	if _, p := ts.searchAs("", "deploy", "&thread=a&from=user"); len(p.Results) != 5 {
		t.Fatalf("thread a from user: %d results", len(p.Results))
	}
	for _, q := range []string{`"unbalanced`, "a*b", "*", "   "} {
		a, _ := ts.searchAs("", q, "")
		if a.status != 400 || a.errCode() != agentbridge.ECodeBadQuery || a.errField("message") == "" {
			t.Errorf("query %q: %d %s, want 400 bad_query", q, a.status, a.body)
		}
	}
	if a := ts.do("GET", "/search?q=x&limit=101", ""); a.status != 400 || a.errField("field") != "limit" {
		t.Errorf("limit 101: %d %s", a.status, a.body)
	}
	if a := ts.do("GET", "/search", ""); a.status != 400 || a.errCode() != agentbridge.ECodeMissingField {
		t.Errorf("no q: %d %s", a.status, a.body)
	}

	_, agent := ts.mint(`{"scope":"agent","name":"run","thread":"a","participant":"claude"}`)
	_, read := ts.mint(`{"scope":"read","name":"r"}`)
	_, p = ts.searchAs(agent, "deploy", "&limit=100")
	seen := map[string]int{}
	for _, r := range p.Results {
		seen[r.Thread]++
	}
	if seen["a"] != 5 || seen["b"] != 1 || seen["c"] != 0 {
		t.Errorf("agent of thread a, invited to b, sees %v; want a and b, never c", seen)
	}
	if a, _ := ts.searchAs(agent, "deploy", "&thread=c"); a.status != 403 {
		t.Errorf("agent filters on thread c: %d %s, want 403", a.status, a.body)
	}
	if _, p := ts.searchAs(read, "secret", ""); len(p.Results) != 1 {
		t.Errorf("a read token finds %d secret notes, want 1", len(p.Results))
	}
}

// TestSchedulesEndpoint: a person's schedule control is listed by GET
// /schedules with its next due time; a bad zone is answered ignored
// naming schedule.tz and is not listed; turning off a schedule the
// thread does not have is ignored (no_schedule) with a sentence; an agent
// token may not list them.
func TestSchedulesEndpoint(t *testing.T) {
	t.Parallel()
	ts := closedServer(t)
	ts.newThread("t")
	ts.newThread("u")
	ts.must(200, "POST", "/threads/t/events", `{"type":"control","from":"user","content":{"schedule":{"id":"standup","cron":"0 9 * * 1-5","tz":"Europe/Berlin","event":{"to":"claude","content":"summarise"}}}}`)
	a := ts.must(200, "POST", "/threads/u/events", `{"type":"control","from":"user","content":{"schedule":{"id":"x","cron":"0 9 * * *","tz":"Nowhere/Land","event":{"content":"x"}}}}`)
	var ans struct{ Ignored *agentbridge.Ignored }
	_ = json.Unmarshal(a.body, &ans)
	if ans.Ignored == nil || ans.Ignored.Code != agentbridge.IgnoredBadSchedule {
		t.Fatalf("bad zone: %s", a.body)
	}
	var page schedulesPage
	if err := json.Unmarshal(ts.must(200, "GET", "/schedules", "").body, &page); err != nil || len(page.Schedules) != 1 {
		t.Fatalf("schedules: %+v %v", page, err)
	}
	next, err := time.Parse(time.RFC3339, page.Schedules[0].Next)
	if err != nil || !next.After(time.Now()) || next.In(mustZone(t, "Europe/Berlin")).Hour() != 9 {
		t.Fatalf("next due time %q", page.Schedules[0].Next)
	}
	if err := json.Unmarshal(ts.must(200, "GET", "/schedules?thread=u", "").body, &page); err != nil || len(page.Schedules) != 0 {
		t.Fatalf("schedules of u: %+v", page)
	}
	off := ts.must(200, "POST", "/threads/u/events", `{"type":"control","from":"user","content":{"schedule":{"id":"x","off":true}}}`)
	ans.Ignored = nil
	if err := json.Unmarshal(off.body, &ans); err != nil || ans.Ignored == nil || ans.Ignored.Code != agentbridge.IgnoredNoSchedule || !strings.Contains(ans.Ignored.Reason, `no schedule "x"`) {
		t.Fatalf("turning off a schedule the thread does not have: %s", off.body)
	}
	_, agent := ts.mint(`{"scope":"agent","name":"run","thread":"t","participant":"claude"}`)
	if a := ts.as(agent).do("GET", "/schedules", ""); a.status != 403 {
		t.Errorf("agent lists schedules: %d", a.status)
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
