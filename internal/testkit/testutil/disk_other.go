//go:build !linux

package testutil

import "testing"

// SmallDisk skips the test: mounting a small tmpfs is Linux's.
func SmallDisk(t testing.TB, size string) string {
	t.Helper()
	t.Skip("a small tmpfs for a full-disk test needs Linux")
	return ""
}

// FillDisk is never reached where SmallDisk skips.
func FillDisk(t testing.TB, path string) { t.Helper() }
