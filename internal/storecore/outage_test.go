package storecore

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

var errDown = errors.New("connection refused")

// TestOutageLogsOnceEachWay: many failures log one start, many successes
// one end; a request that started before the outage and answers after it
// began does not end it, and one that started before its end and fails
// after does not start another.
func TestOutageLogsOnceEachWay(t *testing.T) {
	t.Parallel()
	logs := &testutil.Buffer{}
	resets := 0
	o := NewOutage(slog.New(slog.NewJSONHandler(logs, nil)), func(err error) bool { return errors.Is(err, errDown) }, func() { resets++ })
	other := errors.New("constraint")
	if err := o.Check(time.Now(), other); err != other {
		t.Fatalf("a database error that is no outage came back as %v", err)
	}
	beforeOutage := time.Now()
	for range 100 {
		if err := o.Check(time.Now(), errDown); agentbridge.ErrorCode(err) != agentbridge.ECodeUnavailable {
			t.Fatalf("unreachable database: %v, want unavailable", err)
		}
	}
	if !o.Down() || resets != 1 {
		t.Fatalf("down %v after 100 failures, onStart ran %d times; want down, once", o.Down(), resets)
	}
	if o.Check(beforeOutage, nil); !o.Down() {
		t.Fatal("a request that started before the outage ended it")
	}
	beforeEnd := time.Now()
	for range 10 {
		if err := o.Check(time.Now(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if o.Down() {
		t.Fatal("still down after successes")
	}
	if err := o.Check(beforeEnd, errDown); agentbridge.ErrorCode(err) != agentbridge.ECodeUnavailable || o.Down() {
		t.Fatalf("a slow request failing after the end: %v, down %v; want unavailable and no new outage", err, o.Down())
	}
	l := logs.String()
	if strings.Count(l, "database unreachable") != 1 || strings.Count(l, "database reachable again") != 1 || strings.Count(l, "\n") != 2 {
		t.Fatalf("log:\n%s\nwant one line for the start and one for the end", l)
	}
	if !strings.Contains(l, `"refused_requests":100`) {
		t.Errorf("the end line does not count the refused requests:\n%s", l)
	}
}
