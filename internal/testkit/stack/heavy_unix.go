//go:build unix

package stack

import (
	"os"
	"syscall"
)

// takeSlot takes the lock of the slot file at path without waiting: ok
// is false when another test holds it. The kernel drops the lock when its
// process ends, so a killed test run leaves no slot taken.
func takeSlot(path string) (release func(), ok bool, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, false, nil
		}
		return nil, false, err
	}
	return func() { f.Close() }, true, nil
}
