package client

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRuntimeFile checks up's runtime file: written for the user only,
// read back while its process runs, ignored once it is gone or when others
// could have written it, and removed only by its own process.
func TestRuntimeFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := func(k string) string { return map[string]string{"XDG_RUNTIME_DIR": dir}[k] }
	path := RuntimePath(env)
	if path != filepath.Join(dir, "agent-bridge", "up.json") {
		t.Fatalf("RuntimePath = %q", path)
	}
	if p := RuntimePath(func(k string) string { return map[string]string{"HOME": "/h"}[k] }); p != "/h/.local/state/agent-bridge/up.json" {
		t.Errorf("RuntimePath without XDG_RUNTIME_DIR = %q", p)
	}
	if _, ok, err := ReadRuntime(path); ok || err != nil {
		t.Fatalf("no file: ok %v, err %v", ok, err)
	}
	rt := Runtime{PID: os.Getpid(), BridgeURL: "http://127.0.0.1:18301", StatusURL: "http://127.0.0.1:18302"}
	if err := WriteRuntime(path, rt); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("runtime file mode: %v, %v", fi, err)
	}
	got, ok, err := ReadRuntime(path)
	if !ok || err != nil || got.BridgeURL != rt.BridgeURL || got.StatusURL != rt.StatusURL {
		t.Fatalf("ReadRuntime = %+v, %v, %v", got, ok, err)
	}
	// A file others may write is not trusted.
	if err := os.Chmod(path, 0o622); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ReadRuntime(path); ok || err == nil {
		t.Errorf("a group-writable file was used: ok %v, err %v", ok, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// Another process's file is not removed by this one.
	if err := RemoveRuntime(path, os.Getpid()+1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("removed another process's file: %v", err)
	}
	if err := RemoveRuntime(path, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("runtime file still there: %v", err)
	}
	// A file whose process is gone (up was killed) is ignored.
	rt.PID = 1 << 30
	if err := WriteRuntime(path, rt); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ReadRuntime(path); ok {
		t.Error("a dead process's runtime file was used")
	}
}
