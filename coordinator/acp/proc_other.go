//go:build !linux

package acp

import "syscall"

// procAttr puts an ACP agent in its own process group, so that a cancel
// without answer or a close can kill all it started.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
