package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// searchBridge starts the real binary's serve (built with the
// sqlite_fts5 tag, without which it refuses its database) and returns a
// CLI that reaches it with its person token.
func searchBridge(t *testing.T) cli {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	p := startServe(t, buildServeBinary(t), filepath.Join(t.TempDir(), "data", "bridge.db"))
	return cli{t: t, env: map[string]string{"BRIDGE_URL": p.URL, "BRIDGE_TOKEN": p.Token}}
}

// TestSearchCommand: agent-bridge search prints each hit as its thread's
// name and id, seq, sender, recipient and time, then the text around the
// match with the matched words in [brackets], newest first; --thread takes
// a name, --from narrows to a sender, --limit pages with a cursor it
// prints, --json prints the bridge's answer; a query the bridge cannot
// parse exits 1 with its sentence, a missing query or a bad --limit exits 2.
func TestSearchCommand(t *testing.T) {
	t.Parallel()
	c := searchBridge(t)
	c.ok("thread", "new", "Release plan", "--id", "plan")
	c.ok("thread", "new", "Chatter", "--id", "chat")
	c.ok("post", "plan", "We decided: the parser ships on Friday.")
	c.ok("post", "chat", "the parser is slow again", "--from", "codex")
	c.ok("post", "chat", "nothing to see here")

	out := c.ok("search", "parser", "friday")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^Release plan \(plan\) #2 user → all, \d{4}-\d\d-\d\dT`).MatchString(lines[0]) ||
		lines[1] != "    We decided: the [parser] ships on [Friday]." {
		t.Fatalf("search parser friday printed:\n%s", out)
	}

	out = c.ok("search", "parser")
	if i, j := strings.Index(out, "Chatter (chat) #2 codex"), strings.Index(out, "Release plan (plan) #2 user"); i < 0 || j < i {
		t.Fatalf("search parser: want both hits, newest (chat) first:\n%s", out)
	}
	if out := c.ok("search", "parser", "--thread", "Release plan"); strings.Contains(out, "Chatter") || !strings.Contains(out, "Release plan (plan)") {
		t.Fatalf("search --thread \"Release plan\":\n%s", out)
	}
	if out := c.ok("search", "parser", "--from", "codex"); strings.Contains(out, "Release plan") || !strings.Contains(out, "[parser] is slow") {
		t.Fatalf("search --from codex:\n%s", out)
	}

	first := c.ok("search", "parser", "--limit", "1")
	m := regexp.MustCompile(`(?m)^More: add --cursor (\d+)$`).FindStringSubmatch(first)
	if m == nil || !strings.Contains(first, "Chatter") || strings.Contains(first, "Release plan") {
		t.Fatalf("search --limit 1:\n%s", first)
	}
	second := c.ok("search", "parser", "--limit", "1", "--cursor", m[1])
	if !strings.Contains(second, "Release plan") || strings.Contains(second, "More:") {
		t.Fatalf("search --limit 1 --cursor %s:\n%s", m[1], second)
	}

	var page agentbridge.SearchPage
	if err := json.Unmarshal([]byte(c.ok("search", "--json", "ships", "friday")), &page); err != nil || len(page.Results) != 1 ||
		page.Results[0].Thread != "plan" || page.Results[0].ThreadName != "Release plan" || len(page.Results[0].Marks) != 2 || page.Next != "" {
		t.Fatalf("search --json: %+v, %v", page, err)
	}
	if out := c.ok("search", "zyzzyva"); out != "No matches.\n" {
		t.Fatalf("search for an absent word printed %q", out)
	}

	if _, errOut, code := c.run("search", `"unbalanced`); code != 1 || !strings.Contains(errOut, "not closed") {
		t.Fatalf("a query the bridge cannot parse: exit %d, stderr %q; want 1 with the bridge's sentence", code, errOut)
	}
	for _, args := range [][]string{{"search"}, {"search", "parser", "--limit", "0"}, {"search", "parser", "--limit", "101"}} {
		if _, errOut, code := c.run(args...); code != 2 || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 with a usage line", args, code, errOut)
		}
	}
}

// TestSchedulesCommand: agent-bridge schedules lists every schedule (or a
// thread's, by id or name) with its cron, zone, next due time, sender,
// recipient and message; --json prints them as the bridge answers; a
// thread without schedules says so, more than one THREAD exits 2, an
// unknown thread exits 1; turning a schedule off removes it from the list,
// and turning off one the thread lacks prints the bridge's note.
func TestSchedulesCommand(t *testing.T) {
	t.Parallel()
	c := searchBridge(t)
	c.ok("thread", "new", "Release plan", "--id", "plan")
	c.ok("thread", "new", "Chatter", "--id", "chat")
	if out := c.ok("schedules"); out != "No schedules.\n" {
		t.Fatalf("schedules with none printed %q", out)
	}
	c.ok("post", "plan", `{"schedule":{"id":"standup","cron":"0 9 * * 1-5","tz":"Europe/Berlin","event":{"to":"claude","content":"summarise the open PRs"}}}`, "--type", "control")

	line := regexp.MustCompile(`^plan  standup  "0 9 \* \* 1-5" Europe/Berlin  next \d{4}-\d\d-\d\dT0[78]:00:00Z  as user to claude: summarise the open PRs\n$`)
	for _, args := range [][]string{{"schedules"}, {"schedules", "plan"}, {"schedules", "Release plan"}} {
		if out := c.ok(args...); !line.MatchString(out) {
			t.Errorf("%v printed %q", args, out)
		}
	}
	if out := c.ok("schedules", "chat"); out != "No schedules.\n" {
		t.Errorf("schedules chat printed %q", out)
	}
	var list struct {
		Schedules []agentbridge.Schedule `json:"schedules"`
	}
	if err := json.Unmarshal([]byte(c.ok("schedules", "--json")), &list); err != nil || len(list.Schedules) != 1 ||
		list.Schedules[0].ID != "standup" || list.Schedules[0].From != "user" || list.Schedules[0].Next == "" {
		t.Fatalf("schedules --json: %+v, %v", list, err)
	}
	if _, errOut, code := c.run("schedules", "plan", "chat"); code != 2 || errOut == "" {
		t.Errorf("two threads: exit %d, stderr %q; want 2", code, errOut)
	}
	if _, errOut, code := c.run("schedules", "nowhere"); code != 1 || !strings.Contains(errOut, "nowhere") {
		t.Errorf("an unknown thread: exit %d, stderr %q; want 1 naming it", code, errOut)
	}

	c.ok("post", "plan", `{"schedule":{"id":"standup","off":true}}`, "--type", "control")
	if out := c.ok("schedules"); out != "No schedules.\n" {
		t.Fatalf("after off, schedules printed %q", out)
	}
	if _, errOut, code := c.run("post", "plan", `{"schedule":{"id":"standup","off":true}}`, "--type", "control"); code != 0 ||
		!strings.Contains(errOut, `no schedule "standup"`) || !strings.Contains(errOut, agentbridge.IgnoredNoSchedule) {
		t.Fatalf("turning it off again: exit %d, stderr %q; want the no_schedule note", code, errOut)
	}
}
