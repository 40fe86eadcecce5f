//go:build unix

package fakemodel

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// TestCloseAndRefuse: after CloseAndRefuse a connection to the server's
// address is refused, and no listener, of this test or another, can take
// its port.
func TestCloseAndRefuse(t *testing.T) {
	s := Start(t, "")
	addr := s.ln.Addr().String()
	s.CloseAndRefuse(t)
	if c, err := net.Dial("tcp", addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if ln, err := net.Listen("tcp", addr); err == nil {
		_ = ln.Close()
		t.Fatalf("a listener took %s while it was held", addr)
	}
}
