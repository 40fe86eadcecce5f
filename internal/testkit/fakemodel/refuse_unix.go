//go:build unix

package fakemodel

import (
	"net"
	"syscall"
	"testing"
)

// CloseAndRefuse stops the server and keeps its port until t ends with a
// socket that is bound but does not listen: a CLI pointed at it gets
// "connection refused", as from a model API that is down. A plain Close
// frees the port, which a server of another test running in parallel may
// then be given, and the CLI would talk to that one instead. The socket
// has no SO_REUSEADDR, so no other socket can bind the port meanwhile.
func (s *Server) CloseAndRefuse(t testing.TB) {
	t.Helper()
	addr := s.ln.Addr().(*net.TCPAddr)
	if err := s.Close(); err != nil {
		t.Fatalf("close the fake model server: %v", err)
	}
	// Shutdown does not close a listener that Serve has not taken yet
	// (Serve closes it when it starts, later): close it now, so that the
	// port is free for the bind below.
	_ = s.ln.Close()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("socket to hold port %d: %v", addr.Port, err)
	}
	syscall.CloseOnExec(fd)
	sa := &syscall.SockaddrInet4{Port: addr.Port}
	copy(sa.Addr[:], addr.IP.To4())
	if err := syscall.Bind(fd, sa); err != nil {
		_ = syscall.Close(fd)
		t.Fatalf("hold port %d: %v", addr.Port, err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
}
