package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestAnswerCommand: answer posts the answer control with each FIELD=VALUE
// read as its field's type (a multiple choice from repeated values); a
// value that does not fit is refused with the bridge's sentence naming the
// field; a second answer exits 1 with "already answered"; --decline posts
// a decline; malformed arguments are usage errors.
func TestAnswerCommand(t *testing.T) {
	t.Parallel()
	b := startTestBridge(t)
	c := newCLI(t, b)
	c.ok("thread", "new", "t", "--id", "T")
	ask := func() agentbridge.Event {
		q, err := b.client().Append(t.Context(), "T", agentbridge.EventInput{From: "bridge-coordinator", To: "user",
			Content: json.RawMessage(`"acpy asks: Which branch?"`),
			Meta: agentbridge.Meta{Tags: []string{"coordinator", "question"}, Extra: map[string]json.RawMessage{agentbridge.MetaQuestion: json.RawMessage(
				`{"invocation":1,"message":"Which branch?","fields":[{"name":"branch","type":"string","required":true},` +
					`{"name":"count","type":"integer"},{"name":"ratio","type":"number"},{"name":"force","type":"boolean"},` +
					`{"name":"tags","type":"array","enum":["a","b","c"]}]}`)}}}, "")
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	q := ask()
	if _, errOut, code := c.run("answer", "T", q.ID, "branch=main", "count=three"); code != 1 || !strings.Contains(errOut, `The field "count" needs a whole number.`) {
		t.Errorf("a count that is not a number: exit %d, stderr %q", code, errOut)
	}
	c.ok("answer", "T", "2", "branch=main", "count=3", "ratio=0.5", "force=true", "tags=a", "tags=c")
	evs, err := b.client().ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: "T", After: -1})
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	var got struct {
		Answer struct {
			Event  string          `json:"event"`
			Fields json.RawMessage `json:"fields"`
		} `json:"answer"`
	}
	if err := json.Unmarshal(last.Content, &got); err != nil || last.From != "user" || got.Answer.Event != q.ID ||
		string(got.Answer.Fields) != `{"branch":"main","count":3,"force":true,"ratio":0.5,"tags":["a","c"]}` {
		t.Fatalf("the answer stored = %s (%v)", last.Content, err)
	}
	out, errOut, code := c.run("answer", "T", q.ID, "branch=dev")
	if code != 1 || !strings.Contains(errOut, "already answered by user at "+last.TS) || !strings.Contains(out, " seq ") {
		t.Errorf("a second answer: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	q2 := ask()
	c.ok("answer", "T", q2.ID, "--decline")
	evs, _ = b.client().ThreadEvents(t.Context(), agentbridge.ThreadEventsQuery{Thread: "T", After: -1})
	if ctl := agentbridge.ControlOf(evs[len(evs)-1]); ctl == nil || ctl.Answer == nil || ctl.Answer.Action != agentbridge.AnswerDecline || ctl.Answer.Event != q2.ID {
		t.Errorf("the decline stored = %s", evs[len(evs)-1].Content)
	}
	for _, args := range [][]string{
		{"answer", "T"},
		{"answer", "T", q2.ID, "branch"},
		{"answer", "T", q2.ID, "--decline", "branch=x"},
		{"answer", "T", q2.ID, "branch=a", "branch=b"},
		{"answer", "T", "99", "branch=a"},
	} {
		if _, errOut, code := c.run(args...); code != 2 {
			t.Errorf("%v: exit %d (stderr %q), want 2", args, code, errOut)
		}
	}
}

// TestAnswerReachesTheAgent: with a real coordinator running the fake ACP
// agent, the agent's form is a question that tail shows with its id; the
// person answers from the CLI by its seq; the agent receives exactly those
// values.
func TestAnswerReachesTheAgent(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	fakeACP := bins.Build(t, stack.FakeACP)
	e := newCoordEnv(t, fake)
	setConfig(t, e.cfgPath, "agents", map[string]any{"alice": map[string]any{"acp": []string{fakeACP}, "workdir": filepath.Join(e.dir, "work")}})
	p := e.startCoordProc(bin)
	defer p.Terminate(t)
	th := e.threadWithAlice()
	trig := e.say(th, "alice", "ELICIT the deploy")
	var seq string
	testutil.WaitFor(t, 60*time.Second, "the question", func() bool {
		for _, r := range e.replies(th, trig.ID) {
			if agentbridge.IsFieldQuestion(r) {
				// tail shows it with its id, and its seq first.
				if line := formatEvent(r, false); !regexp.MustCompile(`^\[\d+\] \S+ bridge-coordinator → user \(id \S+\): alice asks: Which branch`).MatchString(line) {
					t.Errorf("tail shows the question as %q", line)
				}
				seq = strconv.FormatInt(r.Seq, 10)
				return true
			}
		}
		return false
	})
	if out, errOut, code := e.cli(bin, "answer", th, seq, "branch=release/1.2", "size=l"); code != 0 {
		t.Fatalf("answer: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	testutil.WaitFor(t, 60*time.Second, "the agent's reply", func() bool {
		for _, r := range e.replies(th, trig.ID) {
			if r.From == "alice" {
				if r.Text() != `elicitation: accept {"branch":"release/1.2","size":"l"}` {
					t.Fatalf("reply = %q, want the agent to get exactly the values", r.Text())
				}
				return true
			}
		}
		return false
	})
}
