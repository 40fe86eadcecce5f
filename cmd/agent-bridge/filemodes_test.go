package main

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// TestFilesArePrivate: up, backup and restore run under umask 000, as a
// careless shell may have it; the data folder they create is 0700, and the
// bridge's database with its -wal and -shm, the person token, the
// coordinator's ledger with its own, a backup (and its folder) and the copy
// restore keeps aside are 0600 (contract 8.3). Before, with that umask the
// database and the ledger were 0666 in a 0777 folder; with the usual 022,
// 0644 in a 0755 one: every message and the VAPID private key readable by
// every user of the machine.
func TestFilesArePrivate(t *testing.T) {
	stack.Heavy(t)
	bin := buildServeBinary(t)
	dir := t.TempDir()
	env := []string{"HOME=" + dir, "PATH=/usr/bin:/bin"}
	underUmask0 := func(args ...string) *exec.Cmd {
		cmd := exec.Command("/bin/sh", append([]string{"-c", `umask 000 && exec "$@"`, "sh", bin}, args...)...)
		cmd.Dir, cmd.Env = dir, env
		return cmd
	}

	up := underUmask0("up", "--addr", "127.0.0.1:0", "--status-addr", "127.0.0.1:0")
	stdout, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var upOut, upErr testutil.Buffer
	up.Stderr = &upErr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = up.Process.Signal(os.Interrupt)
			_ = up.Wait()
		}
	}
	t.Cleanup(stop)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			upOut.Write([]byte(sc.Text() + "\n"))
		}
	}()
	testutil.WaitFor(t, 60*time.Second, "up to list its agents", func() bool {
		return strings.Contains(upOut.String(), "Agents")
	})
	data := filepath.Join(dir, "data")
	// While both run, each database has its -wal and -shm.
	wantModes(t, map[string]fs.FileMode{
		data:                                      0o700,
		filepath.Join(data, "bridge.db"):          0o600,
		filepath.Join(data, "bridge.db-wal"):      0o600,
		filepath.Join(data, "bridge.db-shm"):      0o600,
		filepath.Join(data, "token"):              0o600,
		filepath.Join(data, "coordinator.db"):     0o600,
		filepath.Join(data, "coordinator.db-wal"): 0o600,
		filepath.Join(data, "coordinator.db-shm"): 0o600,
	})
	stop()

	for _, args := range [][]string{
		{"backup", "--to", "backups/monday.db"},
		{"restore", "--from", "backups/monday.db"},
	} {
		if out, err := underUmask0(args...).CombinedOutput(); err != nil {
			t.Fatalf("agent-bridge %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	aside, _ := filepath.Glob(filepath.Join(data, "bridge.db.pre-restore-*"))
	if len(aside) == 0 {
		t.Fatalf("restore kept no copy aside in %s", data)
	}
	want := map[string]fs.FileMode{
		filepath.Join(dir, "backups"):              0o700,
		filepath.Join(dir, "backups", "monday.db"): 0o600,
		filepath.Join(data, "bridge.db"):           0o600,
	}
	for _, p := range aside {
		want[p] = 0o600
	}
	wantModes(t, want)
}

// wantModes checks each path's permission bits.
func wantModes(t *testing.T, want map[string]fs.FileMode) {
	t.Helper()
	for p, mode := range want {
		st, err := os.Stat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s is %#o, want %#o", p, st.Mode().Perm(), mode)
		}
	}
}
