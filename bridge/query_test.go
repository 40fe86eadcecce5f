package bridge

import (
	"strings"
	"testing"
)

// TestQueryParameters goes through every read endpoint and stream with
// bad, repeated, unknown and conflicting query parameters: each is a 400
// invalid_field naming the parameter, before anything is read or a stream
// starts; and the good ones are served.
func TestQueryParameters(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Options{})
	ts.newThread("t1")
	for i := range 4 {
		ts.post("t1", "user", strings.Repeat("m", i+1))
	}
	const when = "2000-01-01T00:00:00Z"
	covered := map[string]bool{}
	for _, tc := range []struct {
		path  string
		field string // "" for a good query: 200
	}{
		{"/threads?limit=1", ""},
		{"/threads?after=t1&limit=2", ""},
		{"/threads?limit=0", "limit"},
		{"/threads?limit=lots", "limit"},
		{"/threads?after=not%20an%20id", "after"},
		{"/threads?limit=1&limit=2", "limit"},
		{"/threads?lmit=1", "lmit"},

		{"/threads/t1", ""},
		{"/threads/t1?tail=3", "tail"},

		{"/threads/t1/events?since=" + when, ""},
		{"/threads/t1/events?tail=3&until=4", ""},
		{"/threads/t1/events?after=1&limit=2", ""},
		{"/threads/t1/events?since=garbage", "since"},
		{"/threads/t1/events?after=1&tail=3", "tail"},
		{"/threads/t1/events?after=1&since=" + when, "since"},
		{"/threads/t1/events?since=" + when + "&tail=2", "tail"},
		{"/threads/t1/events?after=-1", "after"},
		{"/threads/t1/events?tail=0", "tail"},
		{"/threads/t1/events?until=0", "until"},
		{"/threads/t1/events?limit=100000", "limit"},
		{"/threads/t1/events?after=1&after=2", "after"},
		{"/threads/t1/events?wait=5", "wait"},

		{"/threads/t1/events/stream?since=garbage", "since"},
		{"/threads/t1/events/stream?after=1&since=" + when, "since"},
		{"/threads/t1/events/stream?after=x", "after"},
		{"/threads/t1/events/stream?tail=3", "tail"},

		{"/threads/t1/state?at=2", ""},
		{"/threads/t1/state?at=0", "at"},
		{"/threads/t1/state?at=two", "at"},

		{"/threads/t1/transcript?format=json", ""},
		{"/threads/t1/transcript?format=pdf", "format"},

		{"/threads/t1/presence", ""},
		{"/threads/t1/presence?from=me", "from"},

		{"/threads/t1/receipts?limit=5", ""},
		{"/threads/t1/receipts?event=a&from_event=b", "from_event"},
		{"/threads/t1/receipts?limit=0", "limit"},
		{"/threads/t1/receipts?event=" + strings.Repeat("e", 200), "event"},

		{"/events?after=1&limit=2", ""},
		{"/events?wait=61", "wait"},
		{"/events?after=-1", "after"},
		{"/events?limit=0", "limit"},
		{"/events?since=" + when, "since"},

		{"/events/stream?after=x", "after"},
		{"/events/stream?since=" + when, "since"},

		{"/suggestions?status=pending", ""},
		{"/suggestions?status=NOT%20ONE", "status"},

		{"/auth/whoami", ""},
		{"/auth/whoami?as=user", "as"},
		{"/auth/tokens", ""},
		{"/auth/tokens?all=1", "all"},
		{"/auth/tokens?after=3&limit=2", ""},
		{"/auth/tokens?limit=1001", "limit"},
		{"/auth/tokens?limit=0", "limit"},
		{"/auth/tokens?after=-1", "after"},
		{"/coordinators", ""},
		{"/coordinators?live=1", "live"},
		{"/coordinators?served_ever=codex&client=codex", ""},
		{"/coordinators?served_ever=not%20an%20id", "served_ever"},
		{"/claims?thread=t1", ""},
		{"/claims?thread=t1&claimable=c", "claimable"},
		{"/claims?state=running", "state"},
		{"/devices", ""},
		{"/devices?x=1", "x"},
		{"/push/key?x=1", "x"},
		{"/push/subscriptions", ""},
		{"/push/subscriptions?x=1", "x"},
		{"/attachments/t1?download=1", "download"},

		{"/search?q=mm&thread=t1&from=user&limit=2", ""},
		{"/search?q=mm&q=m", "q"},
		{"/search?q=mm&limit=0", "limit"},
		{"/search?q=mm&cursor=0", "cursor"},
		{"/search?q=mm&after=garbage", "after"},
		{"/search?q=mm&thread=not%20an%20id", "thread"},
		{"/search?q=mm&sort=new", "sort"},
		{"/schedules", ""},
		{"/schedules?thread=t1", ""},
		{"/schedules?thread=not%20an%20id", "thread"},
		{"/schedules?x=1", "x"},
	} {
		path, _, _ := strings.Cut(tc.path, "?")
		covered[path] = true
		a := ts.do("GET", tc.path, "")
		if tc.field == "" {
			if a.status != 200 {
				t.Errorf("GET %s: %d %s, want 200", tc.path, a.status, a.body)
			}
			continue
		}
		if a.status != 400 || a.errCode() != "invalid_field" || a.errField("field") != tc.field {
			t.Errorf("GET %s: %d %s, want 400 invalid_field naming %q", tc.path, a.status, a.body, tc.field)
		}
	}
	// Every read endpoint of the API is in the table (the index, ping and
	// healthz take no parameters and answer whatever is sent).
	for _, rt := range ts.srv.api() {
		p := strings.ReplaceAll(rt.pattern, "{id}", "t1")
		if rt.method == "GET" && !covered[p] && p != "/" && p != "/ping" && p != "/healthz" {
			t.Errorf("GET %s is not in the table", rt.pattern)
		}
	}
}
