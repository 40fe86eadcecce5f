//go:build unix && !linux

package adapters

import (
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// sysProcAttr puts the adapter in its own process group. There is no
// parent-death signal outside Linux: leftovers of a crashed coordinator are
// killed by KillGroup at its next start.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitLeader reaps the adapter, then kills what it left in its group.
// Without waitid(WNOWAIT) the group id is free for reuse between the reap
// and the kill; a new group taking it in that instant is very unlikely.
func waitLeader(cmd *exec.Cmd, pgid int, stopEscalation func()) error {
	err := cmd.Wait()
	stopEscalation()
	_ = signalGroup(pgid, syscall.SIGKILL)
	return err
}

// KillGroup kills (SIGKILL) a process group left over from an interrupted
// invocation. Limitation: outside Linux the start time is not checked, so a
// group id recycled since the recorded start would be killed too; the coordinator
// only calls it for records of its own previous run. A group that no longer
// exists is not an error.
func KillGroup(pgid int, _ time.Time) error {
	if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill group: %w", err)
	}
	return nil
}
