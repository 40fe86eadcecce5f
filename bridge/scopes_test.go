package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakepush"
)

// The scope table (contract 8.3): docs/security.md, "What each scope may
// do", holds one row per endpoint or kind of write and one column per
// credential; TestScopeTable reads that table and sends every cell's
// request to a real bridge on 127.0.0.1. A new endpoint is one row there
// and one line in scopeRows.

// scopeColumns are the table's credential columns, in order.
var scopeColumns = []string{"person", "coordinator", "agent", "read", "no token", "`--open`, no token"}

// scopeReq is one cell's request.
type scopeReq struct{ method, path, body string }

// scopeRows builds, for each row of the table (its first cell), the
// request a holder of the column's credential sends. Rows that write make
// what they act on afresh (f.n), so that the cells do not depend on each
// other's order.
var scopeRows = map[string]func(f *scopeFixture, col string) scopeReq{
	"`GET /`":                    get("/"),
	"`GET /ping`":                get("/ping"),
	"`GET /healthz`":             get("/healthz"),
	"`GET /metrics`":             get("/metrics"),
	"`GET /ui`":                  get("/ui"),
	"`GET /auth/whoami`":         get("/auth/whoami"),
	"`GET /auth/tokens`":         get("/auth/tokens"),
	"`GET /threads`":             get("/threads"),
	"`GET /threads/{id}`":        get("/threads/t1"),
	"`GET /threads/{id}/events`": get("/threads/t1/events"),
	"`GET /threads/{id}/events`, another thread": get("/threads/t2/events"),
	"`GET /threads/{id}/events/stream`":          get("/threads/t1/events/stream"),
	"`GET /threads/{id}/state`":                  get("/threads/t1/state"),
	"`GET /threads/{id}/transcript`":             get("/threads/t1/transcript"),
	"`GET /threads/{id}/presence`":               get("/threads/t1/presence"),
	"`GET /threads/{id}/receipts`":               get("/threads/t1/receipts"),
	"`GET /coordinators`":                        get("/coordinators"),
	"`GET /claims?thread=`":                      get("/claims?thread=t1"),
	"`GET /claims?claimable=`, its own id":       get("/claims?claimable=laptop"),
	"`GET /events`":                              get("/events"),
	"`GET /events/stream`":                       get("/events/stream"),
	"`GET /suggestions`":                         get("/suggestions"),
	"`GET /devices`":                             get("/devices"),
	"`GET /push/key`":                            get("/push/key"),
	"`GET /push/subscriptions`":                  get("/push/subscriptions"),

	"`POST /auth/login` with a token": func(f *scopeFixture, _ string) scopeReq {
		return scopeReq{"POST", "/auth/login", `{"token":"` + f.tokens["read"] + `"}`}
	},
	"`POST /auth/logout`": post("/auth/logout", `{}`),
	"`POST /auth/tokens`, an agent token for an agent it serves":          post("/auth/tokens", `{"scope":"agent","name":"run","thread":"t1","participant":"claude"}`),
	"`POST /auth/tokens`, an agent token for another coordinator's agent": post("/auth/tokens", `{"scope":"agent","name":"run","thread":"t1","participant":"codex"}`),
	"`POST /auth/tokens`, any other scope":                                post("/auth/tokens", `{"scope":"read","name":"r"}`),
	"`DELETE /auth/tokens/{id}`, an agent token it made": func(f *scopeFixture, col string) scopeReq {
		maker := f.admin
		if col == "coordinator" {
			maker = f.admin.as(f.tokens[col])
		}
		id, _ := maker.mint(`{"scope":"agent","name":"run","thread":"t1","participant":"claude"}`)
		return scopeReq{"DELETE", "/auth/tokens/" + id, ""}
	},
	"`DELETE /auth/tokens/{id}`, another's token": func(f *scopeFixture, _ string) scopeReq {
		id, _ := f.admin.mint(`{"scope":"read","name":"victim"}`)
		return scopeReq{"DELETE", "/auth/tokens/" + id, ""}
	},
	"`POST /auth/login-links`": post("/auth/login-links", `{}`),
	"`POST /threads`": func(f *scopeFixture, _ string) scopeReq {
		return scopeReq{"POST", "/threads", fmt.Sprintf(`{"id":"new-%d"}`, f.next())}
	},
	"`POST /threads/{id}/events`, a message as a human": post("/threads/t1/events", `{"from":"user","content":"hi"}`),
	"`POST /threads/{id}/events`, a message as itself": func(f *scopeFixture, col string) scopeReq {
		return scopeReq{"POST", "/threads/t1/events", `{"from":"` + f.self(col) + `","content":"hi"}`}
	},
	"`POST /threads/{id}/events`, a message as an agent its registration serves": post("/threads/t1/events", `{"from":"claude","content":"hi"}`),
	"`POST /threads/{id}/events`, a message as another coordinator's agent":      post("/threads/t1/events", `{"from":"codex","content":"hi"}`),
	"`POST /threads/{id}/events`, a message as another coordinator":              post("/threads/t1/events", `{"from":"server","content":"hi"}`),
	"`POST /threads/{id}/events`, a message with the coordinator's marks":        post("/threads/t1/events", `{"from":"claude","content":"failed","meta":{"tags":["coordinator","error"]}}`),
	"`POST /threads/{id}/events`, a control with a human-only key": func(f *scopeFixture, col string) scopeReq {
		return scopeReq{"POST", "/threads/t1/events", `{"type":"control","from":"` + f.self(col) + `","content":{"pause":{"on":false}}}`}
	},
	"`POST /threads/{id}/events`, an invite": func(f *scopeFixture, col string) scopeReq {
		return scopeReq{"POST", "/threads/t1/events", fmt.Sprintf(`{"type":"control","from":%q,"content":{"invite":{"participant_id":"guest-%d","profile":{"client":"c","model":"m"}}}}`, f.self(col), f.next())}
	},
	"`POST /threads/{id}/events`, in another thread": func(f *scopeFixture, col string) scopeReq {
		return scopeReq{"POST", "/threads/t2/events", `{"from":"` + f.self(col) + `","content":"hi"}`}
	},
	"`POST /threads/{id}/presence`, as an agent it serves":          post("/threads/t1/presence", `{"from":"claude","state":"typing"}`),
	"`POST /threads/{id}/presence`, as another coordinator's agent": post("/threads/t1/presence", `{"from":"codex","state":"typing"}`),
	"`PUT /threads/{id}/receipts/{event}/{participant}`, from its id for its agent": func(f *scopeFixture, _ string) scopeReq {
		return scopeReq{"PUT", "/threads/t1/receipts/" + f.trigger + "/claude", `{"from":"laptop","state":"running"}`}
	},
	"`PUT /threads/{id}/receipts/{event}/{participant}`, from another coordinator's id": func(f *scopeFixture, _ string) scopeReq {
		return scopeReq{"PUT", "/threads/t1/receipts/" + f.trigger + "/claude", `{"from":"server","state":"running"}`}
	},
	"`PUT /coordinators/{id}`, its own id": func(f *scopeFixture, col string) scopeReq {
		if col == "coordinator" {
			return scopeReq{"PUT", "/coordinators/laptop", laptopRegistration}
		}
		return scopeReq{"PUT", fmt.Sprintf("/coordinators/new-%d", f.next()), `{"instance":"i","host":"h","agents":[]}`}
	},
	"`PUT /coordinators/{id}`, another coordinator's id": put("/coordinators/server", serverRegistration),
	"`PUT /coordinators/{id}`, a human, a reserved name or another coordinator's id as its agent": func(f *scopeFixture, col string) scopeReq {
		id := "laptop"
		if col != "coordinator" {
			id = fmt.Sprintf("new-%d", f.next())
		}
		return scopeReq{"PUT", "/coordinators/" + id, `{"instance":"i-laptop","host":"laptop","agents":[{"name":"server","kind":"adapter"}]}`}
	},
	"`DELETE /coordinators/{id}`, its own id":               del("/coordinators/laptop?instance=gone"),
	"`DELETE /coordinators/{id}`, another coordinator's id": del("/coordinators/server?instance=gone"),
	"`POST /claims`, a run of a trigger for an agent it serves": func(f *scopeFixture, _ string) scopeReq {
		return scopeReq{"POST", "/claims", claimJSON(f.trigger, "claude", "laptop", "")}
	},
	"`POST /claims`, a run of a message nobody addressed": func(f *scopeFixture, _ string) scopeReq {
		return scopeReq{"POST", "/claims", claimJSON(f.unaddressed, "claude", "laptop", "")}
	},
	"`POST /claims`, a waiting claim for a participant not invited": func(f *scopeFixture, _ string) scopeReq {
		return scopeReq{"POST", "/claims", claimJSON(f.unaddressed, "ghost", "laptop", `,"wait":true`)}
	},
	"`POST /claims`, as another coordinator id": func(f *scopeFixture, _ string) scopeReq {
		return scopeReq{"POST", "/claims", claimJSON(f.codexTrigger, "codex", "server", "")}
	},
	"`POST /claims/{id}/done`, a claim it holds": func(f *scopeFixture, col string) scopeReq {
		claimer := f.admin
		if col == "coordinator" {
			claimer = f.admin.as(f.tokens[col])
		}
		return f.done(claimer, "laptop", "claude")
	},
	"`POST /claims/{id}/done`, another coordinator's claim": func(f *scopeFixture, _ string) scopeReq {
		return f.done(f.admin, "server", "codex")
	},
	"`POST /claims/{id}/wait`, a claim it holds": func(f *scopeFixture, col string) scopeReq {
		claimer := f.admin
		if col == "coordinator" {
			claimer = f.admin.as(f.tokens[col])
		}
		done := f.done(claimer, "laptop", "claude")
		retry := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		return scopeReq{"POST", strings.TrimSuffix(done.path, "/done") + "/wait", strings.TrimSuffix(done.body, "}") + `,"retry_at":"` + retry + `"}`}
	},
	"`POST /threads/{id}/attachments`": post("/threads/t1/attachments?name=notes.txt", "some notes"),
	"`GET /attachments/{id}`": func(f *scopeFixture, _ string) scopeReq {
		a := uploaded(f.admin.t, f.admin.send("POST", "/threads/t1/attachments?name=shown.txt", strings.NewReader("shown"), "application/octet-stream", -1))
		return scopeReq{"GET", "/attachments/" + a.ID, ""}
	},
	"`GET /search`":    get("/search?q=hi"),
	"`GET /schedules`": get("/schedules?thread=t1"),
	"`POST /suggest`, as itself": func(f *scopeFixture, col string) scopeReq {
		return scopeReq{"POST", "/suggest", `{"from":"` + f.self(col) + `","title":"t","description":"d"}`}
	},
	"`POST /suggestions/{id}/status`": func(f *scopeFixture, _ string) scopeReq {
		var sg struct{ ID string }
		_ = json.Unmarshal(f.admin.must(200, "POST", "/suggest", `{"from":"user","title":"t","description":"d"}`).body, &sg)
		return scopeReq{"POST", "/suggestions/" + sg.ID + "/status", `{"status":"accepted","by":"user"}`}
	},
	"`POST /auth/pair`": post("/auth/pair", `{"name":"phone"}`),
	"`POST /auth/pair/redeem`": func(f *scopeFixture, _ string) scopeReq {
		return scopeReq{"POST", "/auth/pair/redeem", `{"code":"` + f.pairCode() + `"}`}
	},
	"`DELETE /devices/{id}`": func(f *scopeFixture, _ string) scopeReq {
		f.admin.as("").must(200, "POST", "/auth/pair/redeem", `{"code":"`+f.pairCode()+`"}`)
		var list struct{ Devices []agentbridge.Device }
		_ = json.Unmarshal(f.admin.must(200, "GET", "/devices", "").body, &list)
		id := ""
		for _, d := range list.Devices {
			if d.ID != "" && d.RevokedAt == "" {
				id = d.ID // the latest paired, as tokens are listed oldest first
			}
		}
		return scopeReq{"DELETE", "/devices/" + id, ""}
	},
	"`POST /push/subscriptions`": func(f *scopeFixture, _ string) scopeReq {
		return scopeReq{"POST", "/push/subscriptions", f.subscription(fmt.Sprintf("https://push.example/%d", f.next()))}
	},
	"`POST /push/unsubscribe`": func(f *scopeFixture, _ string) scopeReq {
		ep := fmt.Sprintf("https://push.example/%d", f.next())
		f.admin.must(200, "POST", "/push/subscriptions", f.subscription(ep))
		return scopeReq{"POST", "/push/unsubscribe", `{"endpoint":"` + ep + `"}`}
	},
	"`POST /push/visible`": func(f *scopeFixture, _ string) scopeReq {
		ep := fmt.Sprintf("https://push.example/%d", f.next())
		f.admin.must(200, "POST", "/push/subscriptions", f.subscription(ep))
		return scopeReq{"POST", "/push/visible", `{"endpoint":"` + ep + `","thread":"t1","visible":true}`}
	},
}

func get(path string) func(*scopeFixture, string) scopeReq {
	return func(*scopeFixture, string) scopeReq { return scopeReq{"GET", path, ""} }
}

func post(path, body string) func(*scopeFixture, string) scopeReq {
	return func(*scopeFixture, string) scopeReq { return scopeReq{"POST", path, body} }
}

func put(path, body string) func(*scopeFixture, string) scopeReq {
	return func(*scopeFixture, string) scopeReq { return scopeReq{"PUT", path, body} }
}

func del(path string) func(*scopeFixture, string) scopeReq {
	return func(*scopeFixture, string) scopeReq { return scopeReq{"DELETE", path, ""} }
}

// The fixture's registrations: laptop serves claude, server codex.
const (
	laptopRegistration = `{"instance":"i-laptop","host":"laptop","agents":[{"name":"claude","client":"claude","kind":"adapter"}]}`
	serverRegistration = `{"instance":"i-server","host":"server","agents":[{"name":"codex","client":"codex","kind":"adapter"}]}`
)

// claimJSON is a run claim's body.
func claimJSON(event, participant, coordinator, extra string) string {
	return fmt.Sprintf(`{"thread":"t1","event":%q,"participant":%q,"coordinator":%q,"instance":"i-%s"%s}`, event, participant, coordinator, coordinator, extra)
}

// scopeFixture is one bridge with thread t1 (claude and codex invited, a
// user's message to each, and a coordinator's message to everyone naming
// nobody), thread t2, coordinator laptop (its own token) serving claude,
// coordinator server serving codex, and a token of every scope.
type scopeFixture struct {
	admin  *testServer // the person's credential (none on an open bridge)
	tokens map[string]string
	// trigger, codexTrigger and unaddressed are events of t1.
	trigger, codexTrigger, unaddressed string
	fp                                 *fakepush.Service
	n                                  int
}

// newScopeFixture builds the fixture on ts, whose own credential acts as
// the person.
func newScopeFixture(t *testing.T, ts *testServer, fp *fakepush.Service) *scopeFixture {
	f := &scopeFixture{admin: ts, tokens: map[string]string{"person": ts.token}, fp: fp}
	ts.newThread("t1")
	ts.newThread("t2")
	for _, p := range []string{"claude", "codex"} {
		ts.must(200, "POST", "/threads/t1/events", `{"type":"control","from":"user","content":{"invite":{"participant_id":"`+p+`","profile":{"client":"`+p+`","model":"m"}}}}`)
	}
	f.trigger = ts.post("t1", "user", "hello claude").ID
	var e struct{ Event agentbridge.Event }
	_ = json.Unmarshal(ts.must(200, "POST", "/threads/t1/events", `{"from":"user","to":"codex","content":"hello codex"}`).body, &e)
	f.codexTrigger = e.Event.ID
	_, f.tokens["coordinator"] = ts.mint(`{"scope":"coordinator","name":"laptop"}`)
	_, f.tokens["read"] = ts.mint(`{"scope":"read","name":"reader"}`)
	_, f.tokens["agent"] = ts.mint(`{"scope":"agent","name":"run","thread":"t1","participant":"claude"}`)
	ts.as(f.tokens["coordinator"]).must(200, "PUT", "/coordinators/laptop", laptopRegistration)
	ts.must(200, "PUT", "/coordinators/server", serverRegistration)
	_ = json.Unmarshal(ts.as(f.tokens["coordinator"]).must(200, "POST", "/threads/t1/events", `{"from":"laptop","content":"rm -rf ~"}`).body, &e)
	f.unaddressed = e.Event.ID
	return f
}

// next is a number not used before in this fixture.
func (f *scopeFixture) next() int {
	f.n++
	return f.n
}

// self is whom col's credential writes as: its coordinator id, its agent
// token's participant, and the human otherwise.
func (f *scopeFixture) self(col string) string {
	switch col {
	case "coordinator":
		return "laptop"
	case "agent":
		return "claude"
	}
	return "user"
}

// done claims a fresh trigger for participant as coordinator through
// claimer, and is the request that finishes the claim.
func (f *scopeFixture) done(claimer *testServer, coordinator, participant string) scopeReq {
	e := f.admin.post("t1", "user", "@"+participant+" again")
	var res agentbridge.ClaimResult
	_ = json.Unmarshal(claimer.must(200, "POST", "/claims", claimJSON(e.ID, participant, coordinator, "")).body, &res)
	return scopeReq{"POST", fmt.Sprintf("/claims/%d/done", res.Claim.ID), fmt.Sprintf(`{"coordinator":%q,"instance":"i-%s","fence":%d}`, coordinator, coordinator, res.Claim.Fence)}
}

// pairCode is a fresh pairing code.
func (f *scopeFixture) pairCode() string {
	var link agentbridge.PairLink
	_ = json.Unmarshal(f.admin.must(200, "POST", "/auth/pair", `{"name":"phone"}`).body, &link)
	return link.Code
}

// subscription is a push subscription's body at endpoint.
func (f *scopeFixture) subscription(endpoint string) string {
	sub, _ := f.fp.Subscribe()
	return `{"endpoint":"` + endpoint + `","keys":{"p256dh":"` + sub.P256dh + `","auth":"` + sub.Auth + `"},"device":"phone","categories":{"permission":true}}`
}

// send sends req with token ("" for none) and returns the status and the
// error code; a stream is closed once its headers are in.
func (f *scopeFixture) send(t *testing.T, token string, req scopeReq) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var body io.Reader
	if req.body != "" {
		body = strings.NewReader(req.body)
	}
	r, err := http.NewRequestWithContext(ctx, req.method, f.admin.url+req.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if req.body != "" {
		r.Header.Set("Content-Type", "application/json")
		if strings.Contains(req.path, "/attachments") {
			r.Header.Set("Content-Type", "application/octet-stream") // an upload's raw bytes
		}
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatalf("%s %s: %v", req.method, req.path, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, answer{body: b}.errCode()
}

// scopeTableRows reads the table of docs/security.md: each row's first
// cell and its cells under scopeColumns.
func scopeTableRows(t *testing.T) map[string][]string {
	t.Helper()
	fh, err := os.Open(filepath.Join("..", "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	rows := map[string][]string{}
	in := false
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## What each scope may do"
		case !in || !strings.HasPrefix(line, "| "):
		default:
			cells := strings.Split(strings.Trim(line, "|"), " | ")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			if cells[0] == "request" || strings.HasPrefix(cells[0], "---") {
				continue
			}
			if len(cells) != 1+len(scopeColumns) {
				t.Fatalf("table row %q has %d cells, want %d", cells[0], len(cells), 1+len(scopeColumns))
			}
			rows[cells[0]] = cells[1:]
		}
	}
	if len(rows) == 0 {
		t.Fatal(`docs/security.md has no table under "## What each scope may do"`)
	}
	return rows
}

// routeOf is the "METHOD /pattern" a table row is about.
var routeOf = regexp.MustCompile("^`([A-Z]+ /[^`?]*)")

// TestScopeTable walks every cell of the scope table in docs/security.md:
// each row's request, sent with each column's credential to a real bridge
// (the last column to one started without a credential, as serve --open),
// is answered as the cell says: "yes" a success, else the error code.
// Every endpoint the bridge serves has a row.
func TestScopeTable(t *testing.T) {
	t.Parallel()
	rows := scopeTableRows(t)
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ui")) })
	fp := fakepush.Start()
	t.Cleanup(fp.Close)
	closed := closedServer(t, Options{UI: ui})
	open := newTestServer(t, Options{UI: ui})
	fc, fo := newScopeFixture(t, closed, fp), newScopeFixture(t, open, fp)

	covered := map[string]bool{}
	for name := range scopeRows {
		if _, ok := rows[name]; !ok {
			t.Errorf("scopeRows has %q, which the table in docs/security.md lacks", name)
		}
	}
	for name, cells := range rows {
		build, ok := scopeRows[name]
		if !ok {
			t.Errorf("the table has the row %q, which scopeRows lacks", name)
			continue
		}
		if m := routeOf.FindStringSubmatch(name); m != nil {
			covered[m[1]] = true
		}
		for i, col := range scopeColumns {
			f, token := fc, fc.tokens[col]
			if col == scopeColumns[len(scopeColumns)-1] {
				f, token = fo, ""
			}
			req := build(f, col)
			status, code := f.send(t, token, req)
			want := strings.Trim(cells[i], "`")
			switch {
			case want == "yes" && (status < 200 || status > 299):
				t.Errorf("%s, %s: %d %s, want a success", name, col, status, code)
			case want != "yes" && code != want:
				t.Errorf("%s, %s: %d %q, want %s", name, col, status, code, want)
			}
		}
	}
	for _, rt := range closed.srv.api() {
		if !covered[rt.method+" "+rt.pattern] {
			t.Errorf("%s %s has no row in the table of docs/security.md", rt.method, rt.pattern)
		}
	}
}
