package acp

import "syscall"

// procAttr puts an ACP agent in its own process group, so that a cancel
// without answer or a close can kill all it started, and has the kernel
// kill it when the coordinator dies (see adapters' sysProcAttr for why the
// forking thread's lifetime is not a concern).
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
