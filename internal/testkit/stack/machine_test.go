package stack

import (
	"net"
	"strings"
	"testing"
)

// TestMachineStartsOnANewPortWhenItsOwnIsTaken: a machine killed and
// started again while another process holds its status port comes up on
// a new port instead of failing the test (as CI once saw: "bind: address
// already in use" after a kill -9 in TestWorkspaceCrash).
func TestMachineStartsOnANewPortWhenItsOwnIsTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	s := New(t, NewPrograms(t.TempDir()), "")
	m := s.Machine("laptop", "alice")
	m.Start()
	m.Kill()
	old := strings.TrimPrefix(m.StatusURL, "http://")
	l, err := net.Listen("tcp", old)
	if err != nil {
		t.Fatalf("hold the machine's old status port: %v", err)
	}
	defer l.Close()
	m.Start()
	if m.StatusURL == "http://"+old || !m.Following() {
		t.Errorf("restarted on %s (old %s), following %v", m.StatusURL, old, m.Following())
	}
}
