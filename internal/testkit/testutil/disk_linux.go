package testutil

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of the given size (mount's size= option: "4m")
// for the test and returns its folder, unmounted when the test ends. It
// skips the test where mounting is not permitted (not root, no
// CAP_SYS_ADMIN).
func SmallDisk(t testing.TB, size string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "small-disk-")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		os.Remove(dir)
		t.Skipf("cannot mount a small tmpfs for a full-disk test: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}

// FillDisk writes the file path until its disk has no free space left.
func FillDisk(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for range 1 << 20 {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatal("the disk never filled")
}
