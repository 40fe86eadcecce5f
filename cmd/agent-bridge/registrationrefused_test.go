package main

import (
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestRegistrationRefusedIsSaid: a coordinator whose token was made for
// another coordinator id is refused its registration, and so answers
// nothing; it says so as an error naming the way out, instead of a
// warning about a bridge it could not reach.
func TestRegistrationRefusedIsSaid(t *testing.T) {
	stack.Heavy(t)
	s := stack.New(t, bins, "")
	m := s.Machine("laptop", "alice") // its token is laptop's
	m.Set("coordinator_id", "server")
	m.Start()
	testutil.WaitFor(t, 30*time.Second, "the coordinator to say its registration is refused", func() bool {
		return strings.Contains(m.Proc.Stderr.String(), "refuses this coordinator's registration")
	})
	if out := m.Proc.Stderr.String(); !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "tokens add --scope coordinator") {
		t.Errorf("the refusal is not an error naming the way out:\n%s", out)
	}
}
