//go:build !linux

package coordinator

import "syscall"

// acpProcAttr puts an ACP agent in its own process group, so that a cancel
// without answer or a close can kill all it started.
func acpProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
