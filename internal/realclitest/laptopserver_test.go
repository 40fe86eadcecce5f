package realclitest

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/fakemodel"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// pageBlock is one shell block of a docs page: the machine whose terminal
// it is typed in (its first line, "# server" or "# laptop") and its text.
type pageBlock struct {
	machine, script string
}

// laptopServerBlocks reads the shell blocks of docs/operations.md's
// "Laptop + server" section, in order.
func laptopServerBlocks(t *testing.T) []pageBlock {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Laptop + server")
	if start < 0 {
		t.Fatal(`docs/operations.md has no "## Laptop + server" section`)
	}
	section := doc[start+3:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []pageBlock
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		first, rest, _ := strings.Cut(m[1], "\n")
		machine := strings.TrimSpace(strings.TrimPrefix(first, "#"))
		if machine != "server" && machine != "laptop" {
			t.Fatalf("a block of the Laptop + server section starts with %q, not # server or # laptop", first)
		}
		blocks = append(blocks, pageBlock{machine, rest})
	}
	return blocks
}

// machine is one of the page's two machines: a folder of its own, as the
// release archive unpacks (adapters/), with a HOME of its own, and the
// environment its terminals have (its agent CLI's PATH and settings).
type machine struct {
	name, dir, status string
	env               []string
}

// TestLaptopAndServerPage follows docs/operations.md's "Laptop + server"
// section word for word, as a person with two machines would: each block
// runs in its machine's folder, with its own HOME, in a shell; a line that
// keeps running (serve, coordinator, tail) runs in the background, as in a
// terminal of its own, and the next block waits until it is up. Only the
// addresses change (10.0.0.2:5111 and each machine's 127.0.0.1:5112 become
// free ports on 127.0.0.1) and scp copies from the server's folder. The
// page ends with both agents answering — codex from the server, claude
// from the laptop, the real CLIs against fake model servers — in the tail
// the person's CLI runs on the laptop with the person token made for it.
func TestLaptopAndServerPage(t *testing.T) {
	t.Parallel()
	need(t)
	blocks := laptopServerBlocks(t)
	bridgeAddr := testutil.FreeAddr(t)
	claude, codex := newAgent(t, "claude", "claude"), newAgent(t, "codex", "codex")
	claude.fake.SetDefault(fakemodel.Reply{Text: "hello from claude on the laptop"})
	codex.fake.SetDefault(fakemodel.Reply{Text: "hello from codex on the server"})

	machines := map[string]*machine{}
	for _, name := range []string{"server", "laptop"} {
		dir := filepath.Join(t.TempDir(), name)
		home := filepath.Join(dir, "home")
		if err := os.MkdirAll(filepath.Join(dir, "adapters"), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, script := range []string{"claude_code.sh", "codex.sh"} {
			b, err := os.ReadFile(filepath.Join(root, "adapters", script))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "adapters", script), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		m := &machine{name: name, dir: dir, status: testutil.FreeAddr(t), env: []string{
			"HOME=" + home, "PATH=" + filepath.Dir(bin) + ":" + cliDir + ":/usr/bin:/bin", "LANG=C.UTF-8", "TMPDIR=" + t.TempDir(),
		}}
		if name == "laptop" {
			// The person's claude is set up on the laptop (its key in the
			// environment), codex on the server (~/.codex/config.toml).
			m.env = append(m.env, claude.fake.ClaudeEnv(goodKey)...)
		} else {
			codexHome := filepath.Join(home, ".codex")
			if err := os.MkdirAll(codexHome, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codex.fake.CodexConfig(codex.model, "FAKE_OPENAI_KEY")), 0o644); err != nil {
				t.Fatal(err)
			}
			m.env = append(m.env, "FAKE_OPENAI_KEY="+goodKey)
		}
		machines[name] = m
	}
	// The person token the bridge made on the server, read the way the
	// test checks on the page's progress (the page itself never needs it).
	person := func() *client.Client {
		b, err := os.ReadFile(filepath.Join(machines["server"].dir, "data", "token"))
		if err != nil {
			t.Fatal(err)
		}
		return client.New("http://"+bridgeAddr, client.WithToken(strings.TrimSpace(string(b))))
	}
	scp := regexp.MustCompile(`(?m)^scp ((?:10\.0\.0\.2:\S+ )+)\.$`)
	for i, blk := range blocks {
		m := machines[blk.machine]
		script := strings.ReplaceAll(blk.script, "10.0.0.2:5111", bridgeAddr)
		script = strings.ReplaceAll(script, "127.0.0.1:5112", m.status)
		script = scp.ReplaceAllStringFunc(script, func(line string) string {
			var files []string
			for _, f := range strings.Fields(line)[1 : len(strings.Fields(line))-1] {
				files = append(files, filepath.Join(machines["server"].dir, filepath.Base(f[strings.Index(f, ":")+1:])))
			}
			return "cp " + strings.Join(files, " ") + " ."
		})
		lines := strings.Split(strings.TrimRight(script, "\n"), "\n")
		last := lines[len(lines)-1]
		// The block's last line keeps running when it is a daemon or
		// tail: exec'd in the background, the way a terminal keeps it.
		keeps := regexp.MustCompile(`^agent-bridge (serve|coordinator|tail)\b`).FindStringSubmatch(last)
		if keeps == nil {
			out := m.run(t, i, script)
			t.Logf("%s, block %d:\n%s", m.name, i+1, out)
			continue
		}
		lines[len(lines)-1] = "exec " + last
		out := m.start(t, i, strings.Join(lines, "\n")+"\n")
		switch keeps[1] {
		case "serve":
			testutil.WaitFor(t, 30*time.Second, "the server's bridge", func() bool {
				res, err := http.Get("http://" + bridgeAddr + "/healthz")
				if err == nil {
					res.Body.Close()
				}
				return err == nil && res.StatusCode == http.StatusOK
			})
		case "coordinator":
			id := regexp.MustCompile(`"coordinator_id": "([a-z]+)"`).FindStringSubmatch(script)
			if id == nil {
				t.Fatalf("block %d starts a coordinator whose config names no coordinator_id", i+1)
			}
			testutil.WaitFor(t, 60*time.Second, "coordinator "+id[1]+" live at the bridge", func() bool {
				list, err := person().Coordinators(t.Context())
				if err != nil {
					return false
				}
				for _, c := range list.Coordinators {
					if c.ID == id[1] && c.Live {
						return true
					}
				}
				return false
			})
		case "tail":
			if i != len(blocks)-1 || blk.machine != "laptop" {
				t.Fatalf("the page's tail is block %d on the %s, want the last block, on the laptop", i+1, blk.machine)
			}
			testutil.WaitFor(t, 3*replyTimeout, "both agents' replies in the laptop's tail", func() bool {
				s := out()
				return regexp.MustCompile(`(?m)^\[\d+\] \S+ claude → \S+: hello from claude on the laptop$`).MatchString(s) &&
					regexp.MustCompile(`(?m)^\[\d+\] \S+ codex → \S+: hello from codex on the server$`).MatchString(s)
			})
			if !strings.Contains(out(), `user: a person token named "laptop-cli"`) {
				t.Errorf("the laptop's CLI is not the person with its own token:\n%s", out())
			}
			t.Logf("the laptop's terminal:\n%s", out())
		}
	}
	// Each machine's state is in ./data of its folder, none in its HOME.
	for _, f := range []string{"server/data/bridge.db", "server/data/token", "server/data/coordinator.db", "laptop/data/coordinator.db"} {
		name, rest, _ := strings.Cut(f, "/")
		if _, err := os.Stat(filepath.Join(machines[name].dir, rest)); err != nil {
			t.Errorf("the page says the state is in ./data: %v", err)
		}
	}
}

// run runs a block to its end in the machine's folder and returns its
// output; a failure fails the test.
func (m *machine) run(t *testing.T, i int, script string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "sh", "-eu")
	cmd.Dir, cmd.Env, cmd.Stdin = m.dir, m.env, strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s, block %d failed: %v\n%s\n--- the block ---\n%s", m.name, i+1, err, out, script)
	}
	return string(out)
}

// start runs a block whose last line keeps running in the background,
// stopped when the test ends; it returns a function reading its output.
func (m *machine) start(t *testing.T, i int, script string) func() string {
	t.Helper()
	log := filepath.Join(t.TempDir(), fmt.Sprintf("%s-block-%d.log", m.name, i+1))
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-eu")
	cmd.Dir, cmd.Env, cmd.Stdin = m.dir, m.env, strings.NewReader(script)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = f.Close(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("--- %s, block %d ---\n%s", m.name, i+1, b)
		}
	})
	return func() string {
		b, _ := os.ReadFile(log)
		return string(b)
	}
}
