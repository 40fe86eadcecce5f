package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testutil"
)

// TestRegistrationRefusedIsSaid: a coordinator whose token was made for
// another coordinator id is refused its registration, and so answers
// nothing; it says so as an error naming the way out, instead of a
// warning about a bridge it could not reach.
func TestRegistrationRefusedIsSaid(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin, fake := buildCoordBinaries(t)
	url, person, _ := logServe(t, bin, filepath.Join(t.TempDir(), "bridge.db"))
	cl := client.New(url, client.WithToken(person))
	m := newMachine(t, cl, url, fake, "laptop", "alice") // its token is laptop's
	m.set("coordinator_id", "server")
	m.start(bin)
	testutil.WaitFor(t, 30*time.Second, "the coordinator to say its registration is refused", func() bool {
		return strings.Contains(m.proc.stderr.String(), "refuses this coordinator's registration")
	})
	if out := m.proc.stderr.String(); !strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "tokens add --scope coordinator") {
		t.Errorf("the refusal is not an error naming the way out:\n%s", out)
	}
}
