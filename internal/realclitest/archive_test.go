package realclitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// envArchive names a release archive (agent-bridge_linux_ARCH.tar.gz) for
// TestArchiveClaudeExample; .ci/release-check sets it to the snapshot it
// built.
const envArchive = "AGENT_BRIDGE_ARCHIVE"

// readmeClaudeExample is the README's Claude Code example: the shell block
// after its "**Claude Code**" paragraph.
func readmeClaudeExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "**Claude Code**")
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(after)
	if !ok || m == nil {
		t.Fatal("README.md has no **Claude Code** paragraph followed by a shell block")
	}
	return m[1]
}

// TestArchiveClaudeExample unpacks the release archive into an empty folder
// and, from it alone — no repository, no Go on the PATH, a HOME of its
// own — runs the README's Claude Code example as written there: up loads
// the archive's coordinator.config.json, whose claude-code agent runs the
// archive's adapters/claude_code.sh, which runs the real, pinned claude
// (against a fake model server); the reply shows in tail.
func TestArchiveClaudeExample(t *testing.T) {
	archive := os.Getenv(envArchive)
	if archive == "" {
		t.Skip(envArchive + " is not set: .ci/release-check sets it to the release snapshot it built")
	}
	need(t)
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("unpack %s: %v\n%s", archive, err, out)
	}
	for _, f := range []string{"agent-bridge", "adapters/claude_code.sh", "adapters/codex.sh"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("the archive's %s: %v (mode %v), want an executable file", f, err, st)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "coordinator.config.json")); err != nil {
		t.Fatalf("the archive lacks the coordinator's config: %v", err)
	}
	fake := fakemodel.Start(t, goodKey)
	fake.SetDefault(fakemodel.Reply{Text: "2 + 2 is 4."})
	env := append([]string{"HOME=" + t.TempDir(), "PATH=" + dir + ":" + cliDir + ":/usr/bin:/bin", "LANG=C.UTF-8"}, fake.ClaudeEnv(goodKey)...)
	if out, err := (&exec.Cmd{Path: "/bin/sh", Args: []string{"sh", "-c", "command -v go"}, Env: env}).CombinedOutput(); err == nil {
		t.Fatalf("go is on the person's PATH: %s", out)
	}

	// up, from the archive's folder, on free ports; the commands find it
	// through the runtime file it writes under HOME.
	ex := &machine{name: "archive", dir: dir, env: env}
	up := ex.start(t, 0, "exec ./agent-bridge up --addr 127.0.0.1:0 --status-addr 127.0.0.1:0\n")
	testutil.WaitFor(t, 60*time.Second, "up to list claude-code among its agents", func() bool {
		return regexp.MustCompile(`(?m)^\s*claude-code\s`).MatchString(up())
	})
	example := strings.Split(strings.TrimRight(readmeClaudeExample(t), "\n"), "\n")
	last := example[len(example)-1]
	if !strings.HasPrefix(last, "./agent-bridge tail ") {
		t.Fatalf("the README's Claude Code example should end with tail, ends with %q", last)
	}
	example[len(example)-1] = "exec " + last
	tail := ex.start(t, 1, strings.Join(example, "\n")+"\n")
	testutil.WaitFor(t, 2*replyTimeout, "claude-code's reply in tail", func() bool {
		return regexp.MustCompile(`(?m)^\[\d+\] \S+ claude-code → \S+: 2 \+ 2 is 4\.$`).MatchString(tail())
	})
	t.Logf("tail:\n%s", tail())
}
