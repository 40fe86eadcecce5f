package sqlitex

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The modes of what holds a database (contract 8.3): every message, the
// VAPID private key and the tokens' hashes are in the bridge's file, the
// runs and their triggers in the coordinator's ledger.
const (
	// FolderMode is the mode of a folder agent-bridge creates for a
	// database.
	FolderMode fs.FileMode = 0o700
	// FileMode is the mode of a database file, its -wal and -shm, a
	// backup and a copy kept aside.
	FileMode fs.FileMode = 0o600
)

// MakePrivate readies path for a read-write open: its folder is created
// FolderMode when missing, the file is created FileMode when missing, and
// an existing file and the -wal and -shm beside it are set to FileMode.
// The modes are set with chmod, so the umask cannot widen or narrow them.
// SQLite gives the -wal and -shm it creates the database file's mode, so
// they follow. A folder that exists is left as it is (it may be a person's
// own, shared with other files); FolderOpen says when it is readable by
// others.
func MakePrivate(path string) error {
	if err := MakeFolder(filepath.Dir(path)); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, FileMode)
	switch {
	case err == nil:
		if err := f.Close(); err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("create %s: %w", path, err)
	}
	return KeepPrivate(path, path+"-wal", path+"-shm")
}

// MakeFolder creates dir, and the folders above it that are missing,
// FolderMode whatever the umask; a folder that exists is left as it is.
func MakeFolder(dir string) error {
	if dir == "" || dir == "." {
		return nil
	}
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("create folder %s: a file of that name is in the way", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MakeFolder(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, FolderMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create folder %s: %w", dir, err)
	}
	if err := os.Chmod(dir, FolderMode); err != nil {
		return fmt.Errorf("create folder %s: %w", dir, err)
	}
	return nil
}

// KeepPrivate sets each of paths that exists to FileMode.
func KeepPrivate(paths ...string) error {
	for _, p := range paths {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("check the mode of %s: %w", p, err)
		}
		if st.Mode().Perm() == FileMode {
			continue
		}
		if err := os.Chmod(p, FileMode); err != nil {
			return fmt.Errorf("make %s readable by its owner only (chmod 600): %w", p, err)
		}
	}
	return nil
}

// FolderOpen reports whether path's folder lets users other than its owner
// in (any group or other permission), and its mode, for a warning.
func FolderOpen(path string) (fs.FileMode, bool) {
	st, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return 0, false
	}
	return st.Mode().Perm(), st.Mode().Perm()&0o077 != 0
}
