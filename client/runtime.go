package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Runtime is what a running "agent-bridge up" publishes about itself in
// its runtime file, so that the other commands find it without flags or
// environment (contract 6.4). The file is written when up listens and
// removed when it exits.
type Runtime struct {
	// PID is up's process; a file whose process is gone is ignored.
	PID int `json:"pid"`
	// BridgeURL and StatusURL are where the bridge and the coordinator's
	// status API listen.
	BridgeURL string `json:"bridge_url"`
	StatusURL string `json:"status_url"`
	// TokenFile is the file holding a person token of the bridge: up's
	// --token-file, else the one the bridge made in its state folder.
	TokenFile string `json:"token_file,omitempty"`
	// Dir is up's working folder, DB and State its databases (absolute
	// paths or URLs), so that a second up can tell it would share them.
	Dir   string `json:"dir"`
	DB    string `json:"db"`
	State string `json:"state"`
	// Started is when up started (RFC 3339).
	Started string `json:"started"`
}

// RuntimePath is where up's runtime file lives for the user whose
// environment getenv reads: $XDG_RUNTIME_DIR/agent-bridge/up.json, else
// $HOME/.local/state/agent-bridge/up.json; "" when neither is set.
func RuntimePath(getenv func(string) string) string {
	if d := getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "agent-bridge", "up.json")
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "state", "agent-bridge", "up.json")
	}
	return ""
}

// ReadRuntime reads the runtime file at path. It reports ok only for a
// file of a running process that belongs to this user and that no one
// else could have written: a stale file (up was killed) or a foreign one
// is as good as none.
func ReadRuntime(path string) (rt Runtime, ok bool, err error) {
	if path == "" {
		return Runtime{}, false, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Runtime{}, false, nil
	}
	if err != nil {
		return Runtime{}, false, fmt.Errorf("read up's runtime file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Runtime{}, false, fmt.Errorf("read up's runtime file: %w", err)
	}
	if st, isUnix := fi.Sys().(*syscall.Stat_t); isUnix && (int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o022 != 0) {
		return Runtime{}, false, fmt.Errorf("up's runtime file %s is not this user's own (owner %d, mode %v); ignored", path, st.Uid, fi.Mode().Perm())
	}
	if err := json.NewDecoder(f).Decode(&rt); err != nil {
		return Runtime{}, false, fmt.Errorf("up's runtime file %s: %w", path, err)
	}
	if !processAlive(rt.PID) {
		return rt, false, nil
	}
	return rt, true, nil
}

// processAlive reports whether a process with this pid runs.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// WriteRuntime writes rt to path, readable by the user only, replacing
// any file there in one rename so that a reader never sees half of it.
func WriteRuntime(path string, rt Runtime) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write up's runtime file: %w", err)
	}
	b, err := json.MarshalIndent(rt, "", "  ")
	if err != nil {
		return fmt.Errorf("write up's runtime file: %w", err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write up's runtime file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write up's runtime file: %w", err)
	}
	return nil
}

// RemoveRuntime removes the runtime file at path if it is still pid's,
// so that an up that exits never removes a newer up's file.
func RemoveRuntime(path string, pid int) error {
	rt, _, err := ReadRuntime(path)
	if err != nil || rt.PID != pid {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove up's runtime file: %w", err)
	}
	return nil
}
