package adapters

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// sysProcAttr puts the adapter in its own process group (so the whole group
// can be signalled) and asks the kernel to SIGKILL it if its parent dies.
//
// Pdeathsig fires when the OS thread that forked the child exits, not the
// process. That is fine here: the Go runtime only ends a thread when a
// goroutine exits while locked to it (runtime.LockOSThread), and such a
// thread never runs other goroutines, so the fork happens on a thread that
// lives as long as the coordinator.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitid(2) constants, as in <sys/wait.h>.
const (
	pPID    = 1
	wExited = 0x4
	wNoWait = 0x1000000
)

// waitExited blocks until process pid has exited without reaping it, so
// its pid (and with it the process group id) cannot be reused yet.
func waitExited(pid int) error {
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		default:
			return fmt.Errorf("waitid %d: %w", pid, errno)
		}
	}
}

// waitLeader waits for the adapter to exit, kills what it left in its group
// while the exited leader still pins the group id, then reaps it.
func waitLeader(cmd *exec.Cmd, pgid int, stopEscalation func()) error {
	if err := waitExited(cmd.Process.Pid); err != nil {
		// Cannot wait without reaping: fall back to the portable order.
		werr := cmd.Wait()
		stopEscalation()
		_ = signalGroup(pgid, syscall.SIGKILL)
		return werr
	}
	stopEscalation()
	_ = signalGroup(pgid, syscall.SIGKILL)
	return cmd.Wait()
}

// startTolerance is how far a process's start time, as read from /proc
// (whole seconds of boot time plus clock ticks), may be from the recorded
// start and still count as the same process.
const startTolerance = 5 * time.Second

// KillGroup kills (SIGKILL) a process group left over from an interrupted
// invocation, as the coordinator does at start-up for every running record
// in its ledger. startedAt is the invocation's recorded start (the zero time
// skips the check).
//
// On Linux the group leader's start time is read from /proc/<pgid>/stat: if
// that pid now belongs to a process started at another time, or to a
// process that does not lead its group, the pid was recycled after our
// group died and nothing is killed. Limitation: when the leader is gone but
// members of its group remain, there is no start time to compare and the
// group is killed on the strength of its id alone (the kernel does not reuse
// a pid while a group with that id exists, so this is only wrong if the
// group died and a new one was created with the same id). A group that no
// longer exists is not an error.
func KillGroup(pgid int, startedAt time.Time) error {
	if pgid <= 1 {
		return fmt.Errorf("kill group: invalid process group id %d", pgid)
	}
	start, pgrp, err := procStart(pgid)
	switch {
	case err == nil:
		if pgrp != pgid {
			return nil
		}
		if !startedAt.IsZero() && absDuration(start.Sub(startedAt)) > startTolerance {
			return nil
		}
	case errors.Is(err, fs.ErrNotExist):
		// The leader is gone; members may remain.
	default:
		// No usable /proc: fall back to the id alone.
	}
	if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill group: %w", err)
	}
	return nil
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times; the kernel
// reports 100 on every architecture Go supports.
const clockTicks = 100

// procStart returns the start time and process group of pid from /proc.
func procStart(pid int) (time.Time, int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return time.Time{}, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return time.Time{}, 0, fmt.Errorf("parse /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 20 {
		return time.Time{}, 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	pgrp, err := strconv.Atoi(f[5-3])
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("parse /proc/%d/stat pgrp: %w", pid, err)
	}
	ticks, err := strconv.ParseInt(f[22-3], 10, 64)
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("parse /proc/%d/stat starttime: %w", pid, err)
	}
	boot, err := bootTime()
	if err != nil {
		return time.Time{}, 0, err
	}
	return boot.Add(time.Duration(ticks) * time.Second / clockTicks), pgrp, nil
}

// bootTime reads btime from /proc/stat.
func bootTime() (time.Time, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, fmt.Errorf("read boot time: %w", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("parse btime: %w", err)
			}
			return time.Unix(sec, 0), nil
		}
	}
	return time.Time{}, errors.New("read boot time: no btime in /proc/stat")
}
