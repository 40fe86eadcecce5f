// Command fakeadapter is a real adapter program for tests. It reads the
// payload from stdin and is steered by directives in the message content
// (whitespace-separated tokens), so end-to-end tests can steer it through
// the bridge:
//
//	fake:sleep=DURATION   sleep before replying (Go duration: 2s, 150ms)
//	fake:exit=N           exit with status N after printing
//	fake:stderr=TEXT      write TEXT to stderr (_ means space)
//	fake:big=BYTES        write exactly BYTES bytes to stdout instead of a reply
//	fake:child            spawn a grandchild that never exits, write its pid to
//	                      $FAKE_ADAPTER_DIR/<event_id>.child, then hang
//	fake:hang             sleep forever
//	fake:ignoreterm       ignore SIGTERM (also in the grandchild)
//	fake:say=TEXT         reply exactly TEXT (_ means space)
//	fake:progress=N       write N progress records to $BRIDGE_PROGRESS_FD
//	                      (status "step i", cumulative usage of i tokens in,
//	                      2i out and i/1000 USD, session "fake-session"),
//	                      plus one bad line and one line over 8 KiB
//	fake:flood=RATE       while the rest runs, write RATE progress lines a
//	                      second to $BRIDGE_PROGRESS_FD (in 10 ms bursts)
//	fake:session=fresh    act as a CLI that no longer knows payload.session.id:
//	                      report a new session (needs FAKE_ADAPTER_SESSION)
//	fake:env              save its environment, one KEY=VALUE a line, as
//	                      $FAKE_ADAPTER_DIR/<event_id>-<participant>.env
//	fake:write=FILE=TEXT  write TEXT and a newline (_ means space) to FILE in its
//	                      working folder (a workspace's worktree), replacing it;
//	                      several may be given
//	fake:wait             before replying, wait (up to 2 minutes) until the file
//	                      $FAKE_ADAPTER_DIR/<event_id>.release exists, so a
//	                      test can act while the run is on
//	fake:files            reply one line per payload attachment, "file NAME
//	                      sha256:HEX PATH", the hash of the bytes read at its
//	                      path during the run ("missing" when none)
//
// With FAKE_ADAPTER_SESSION=keep it acts as a CLI with sessions: it resumes
// payload.session.id when set, else starts session "s-<participant>-<event_id>",
// and reports the session it used on $BRIDGE_PROGRESS_FD.
//
// When the payload has a scene briefing it plays an actor instead
// (see actScene): its directives are read from its brief.
// A directive written fake@ID:… (or fake@ID/ROUND:…) applies only to
// participant ID (in party round ROUND), so that one message can steer the
// agents of a party round differently: fake@bob/2:say=[PASS].
//
// An unknown "fake:" directive makes it exit 70. The default reply is
// "<participant id> got: <content>". With
// $FAKE_ADAPTER_DIR set, the payload is saved as
// <event_id>-<participant>.json (…-r<round>.json in a party round) and a
// line "<event_id> <participant> <pid> <round>" is appended to runs.log, so
// tests can count runs.
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Environment variables of the fake.
const (
	envDir        = "FAKE_ADAPTER_DIR"
	envGrandchild = "FAKE_ADAPTER_GRANDCHILD"
	envIgnoreTerm = "FAKE_ADAPTER_IGNORETERM"
	envSession    = "FAKE_ADAPTER_SESSION"
)

type payload struct {
	EventID     string `json:"event_id"`
	Content     string `json:"content"`
	Participant struct {
		ID string `json:"id"`
	} `json:"participant"`
	Session struct {
		ID string `json:"id"`
	} `json:"session"`
	Scene *struct {
		Actor   string   `json:"actor"`
		Journal string   `json:"journal"`
		Brief   string   `json:"brief"`
		Turn    int      `json:"turn"`
		Nudge   string   `json:"nudge"`
		Step    string   `json:"step"`
		With    []string `json:"with"`
	} `json:"scene"`
	Party *struct {
		Round int `json:"round"`
	} `json:"party"`
	Attachments []struct {
		Name string `json:"name"`
		Path string `json:"path"`
	} `json:"attachments"`
}

// round is the payload's party round, 0 outside party mode.
func (p payload) round() int {
	if p.Party == nil {
		return 0
	}
	return p.Party.Round
}

type directives struct {
	// writes are the files fake:write writes: name and content.
	writes     [][2]string
	sleep      time.Duration
	exit       int
	stderr     string
	big        int64
	child      bool
	hang       bool
	ignoreTerm bool
	say        *string
	progress   int
	flood      int
	fresh      bool
	env        bool
	wait       bool
	files      bool
}

func main() {
	if os.Getenv(envGrandchild) != "" {
		if os.Getenv(envIgnoreTerm) != "" {
			signal.Ignore(syscall.SIGTERM)
		}
		sleepForever()
	}
	code, err := run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakeadapter: %v\n", err)
		code = 70
	}
	os.Exit(code)
}

// run does what the directives say and returns the exit status.
func run() (int, error) {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		return 0, fmt.Errorf("read stdin: %w", err)
	}
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return 0, fmt.Errorf("decode payload: %w", err)
	}
	if p.Scene != nil {
		return actScene(p, raw)
	}
	d, err := parse(p.Content, p.Participant.ID, p.round())
	if err != nil {
		return 0, err
	}
	if d.ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	dir := os.Getenv(envDir)
	if dir != "" {
		if err := record(dir, p, raw); err != nil {
			return 0, err
		}
	}
	if d.stderr != "" {
		fmt.Fprintln(os.Stderr, d.stderr)
	}
	if d.progress > 0 {
		if err := writeProgress(d.progress); err != nil {
			return 0, err
		}
	}
	if d.flood > 0 {
		go flood(d.flood)
	}
	if os.Getenv(envSession) == "keep" {
		if err := reportSession(p, d.fresh); err != nil {
			return 0, err
		}
	}
	if d.env || d.wait {
		if err := envAndWait(dir, p, d); err != nil {
			return 0, err
		}
	}
	if d.child {
		if err := spawnChild(dir, p.EventID, d.ignoreTerm); err != nil {
			return 0, err
		}
		sleepForever()
	}
	for _, w := range d.writes {
		if err := os.MkdirAll(filepath.Dir(w[0]), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(w[0], []byte(w[1]), 0o644); err != nil {
			return 0, err
		}
	}
	if d.sleep > 0 {
		time.Sleep(d.sleep)
	}
	if d.hang {
		sleepForever()
	}
	switch {
	case d.big > 0:
		if err := writeBig(d.big); err != nil {
			return 0, err
		}
	case d.say != nil:
		fmt.Print(*d.say)
	case d.files:
		for _, a := range p.Attachments {
			fmt.Printf("file %s %s %s\n", a.Name, fileHash(a.Path), a.Path)
		}
	default:
		fmt.Printf("%s got: %s", p.Participant.ID, p.Content)
	}
	return d.exit, nil
}

func parse(content, participant string, round int) (directives, error) {
	var d directives
	for _, tok := range strings.Fields(content) {
		name, ok := strings.CutPrefix(tok, "fake:")
		if scoped, isScoped := strings.CutPrefix(tok, "fake@"); isScoped {
			var scope string
			scope, name, ok = strings.Cut(scoped, ":")
			who, r, hasRound := strings.Cut(scope, "/")
			if who != participant || (hasRound && r != strconv.Itoa(round)) {
				continue
			}
		}
		if !ok {
			continue
		}
		key, val, _ := strings.Cut(name, "=")
		var err error
		switch key {
		case "sleep":
			d.sleep, err = time.ParseDuration(val)
		case "exit":
			d.exit, err = strconv.Atoi(val)
		case "stderr":
			d.stderr = strings.ReplaceAll(val, "_", " ")
		case "big":
			d.big, err = strconv.ParseInt(val, 10, 64)
		case "child":
			d.child = true
		case "hang":
			d.hang = true
		case "ignoreterm":
			d.ignoreTerm = true
		case "say":
			s := strings.ReplaceAll(val, "_", " ")
			d.say = &s
		case "progress":
			d.progress, err = strconv.Atoi(val)
		case "flood":
			d.flood, err = strconv.Atoi(val)
		case "env":
			d.env = true
		case "wait":
			d.wait = true
		case "files":
			d.files = true
		case "write":
			file, text, found := strings.Cut(val, "=")
			if !found || file == "" || strings.Contains(file, "..") || filepath.IsAbs(file) {
				err = fmt.Errorf("fake:write needs FILE=TEXT with a relative FILE")
			}
			d.writes = append(d.writes, [2]string{file, strings.ReplaceAll(text, "_", " ") + "\n"})
		case "session":
			if val != "fresh" {
				err = fmt.Errorf("only fake:session=fresh is known")
			}
			d.fresh = true
		default:
			err = fmt.Errorf("unknown directive")
		}
		if err != nil {
			return d, fmt.Errorf("directive %q: %w", tok, err)
		}
	}
	return d, nil
}

func record(dir string, p payload, raw []byte) error {
	// Write then rename, so a test that sees the file sees all of it.
	base := p.EventID + "-" + p.Participant.ID
	if p.round() > 0 {
		base += fmt.Sprintf("-r%d", p.round())
	}
	name := filepath.Join(dir, base+".json")
	if err := os.WriteFile(name+".tmp", raw, 0o644); err != nil {
		return fmt.Errorf("save payload: %w", err)
	}
	if err := os.Rename(name+".tmp", name); err != nil {
		return fmt.Errorf("save payload: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "runs.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open runs.log: %w", err)
	}
	if _, err := fmt.Fprintf(f, "%s %s %d %d\n", p.EventID, p.Participant.ID, os.Getpid(), p.round()); err != nil {
		f.Close()
		return fmt.Errorf("append runs.log: %w", err)
	}
	return f.Close()
}

// spawnChild starts a copy of this program that sleeps forever with the same
// stdout and stderr, the way a CLI's helper process would hold the pipes.
func spawnChild(dir, eventID string, ignoreTerm bool) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envGrandchild+"=1")
	if ignoreTerm {
		cmd.Env = append(cmd.Env, envIgnoreTerm+"=1")
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if f := progressFile(); f != nil {
		// The grandchild holds the progress pipe too, as a CLI's
		// helper might.
		cmd.ExtraFiles = []*os.File{f}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start grandchild: %w", err)
	}
	if dir != "" {
		// Write then rename, so a test that sees the file sees the pid.
		name := filepath.Join(dir, eventID+".child")
		if err := os.WriteFile(name+".tmp", []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			return fmt.Errorf("save grandchild pid: %w", err)
		}
		if err := os.Rename(name+".tmp", name); err != nil {
			return fmt.Errorf("save grandchild pid: %w", err)
		}
	}
	return nil
}

func writeBig(n int64) error {
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for n > 0 {
		k := min(n, int64(len(line)))
		if _, err := w.Write(line[:k]); err != nil {
			return fmt.Errorf("write stdout: %w", err)
		}
		n -= k
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write stdout: %w", err)
	}
	return nil
}

func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// progressFile is the progress fd the coordinator opened, or nil.
func progressFile() *os.File {
	n, err := strconv.Atoi(os.Getenv("BRIDGE_PROGRESS_FD"))
	if err != nil || n < 3 {
		return nil
	}
	return os.NewFile(uintptr(n), "progress")
}

func writeProgress(n int) error {
	f := progressFile()
	if f == nil {
		return fmt.Errorf("fake:progress needs BRIDGE_PROGRESS_FD")
	}
	w := bufio.NewWriter(f)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, `{"status":"step %d","kind":"tool","detail":{"i":%d},"usage":{"input_tokens":%d,"output_tokens":%d,"cost_usd":%g},"session":"fake-session"}`+"\n",
			i, i, i, 2*i, float64(i)/1000)
		if i == 1 {
			fmt.Fprintln(w, "not json")
			fmt.Fprintln(w, strings.Repeat("y", 9<<10))
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write progress: %w", err)
	}
	return nil
}

// reportSession reports the session a CLI would have used: the payload's
// (resumed) unless there is none or fresh says the CLI refused it.
func reportSession(p payload, fresh bool) error {
	f := progressFile()
	if f == nil {
		return fmt.Errorf("%s needs BRIDGE_PROGRESS_FD", envSession)
	}
	id := p.Session.ID
	if id == "" || fresh {
		id = "s-" + p.Participant.ID + "-" + p.EventID
	}
	line, err := json.Marshal(map[string]string{"status": "session " + id, "kind": "session", "session": id})
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write progress: %w", err)
	}
	return nil
}

// flood writes rate lines a second until the process exits, catching up
// on ticks the scheduler delayed; write errors (the coordinator closed the
// pipe) end it.
func flood(rate int) {
	f := progressFile()
	if f == nil {
		return
	}
	line := []byte(`{"status":"flooding","kind":"text","detail":"` + strings.Repeat("z", 64) + `"}` + "\n")
	var batch []byte
	start := time.Now()
	written := 0
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for range t.C {
		owed := int(time.Since(start).Seconds()*float64(rate)) - written
		batch = batch[:0]
		for range owed {
			batch = append(batch, line...)
		}
		if _, err := f.Write(batch); err != nil {
			return
		}
		written += owed
	}
}

// actScene plays an actor. Its brief may hold these directives, N being a
// scene turn number:
//
//	fake:close=N   say a closing line at turn N
//	fake:end=N     say the explicit end marker at turn N
//	fake:raw=N     answer without tags at turn N, until corrected
//	fake:broken=N  answer without tags at turn N, even when corrected
//	fake:sleep=D   sleep D before every answer
//
// Its thinking always holds the marker SECRET-<actor>-<turn>, so tests can
// search other actors' payloads for it. The payload is saved as
// <event_id>-<participant>[-corr].json.
func actScene(p payload, raw []byte) (int, error) {
	sc := p.Scene
	corr := strings.HasPrefix(sc.Nudge, "Your last response did not use")
	if dir := os.Getenv(envDir); dir != "" {
		q := p
		if corr {
			q.Participant.ID += "-corr"
		}
		if err := record(dir, q, raw); err != nil {
			return 0, err
		}
	}
	at := map[string]int{}
	var sleep time.Duration
	for _, tok := range strings.Fields(sc.Brief) {
		name, ok := strings.CutPrefix(tok, "fake:")
		if !ok {
			continue
		}
		key, val, _ := strings.Cut(name, "=")
		if key == "sleep" {
			d, err := time.ParseDuration(val)
			if err != nil {
				return 0, fmt.Errorf("directive %q: %w", tok, err)
			}
			sleep = d
			continue
		}
		n, err := strconv.Atoi(val)
		if err != nil {
			return 0, fmt.Errorf("directive %q: %w", tok, err)
		}
		at[key] = n
	}
	time.Sleep(sleep)
	if sc.Step == "journal" {
		fmt.Printf("JOURNAL-%s: I played a scene with %s. Earlier entries: %d bytes.", sc.Actor, strings.Join(sc.With, ", "), len(sc.Journal))
		return 0, nil
	}
	speech := fmt.Sprintf("%s says line %d.", sc.Actor, sc.Turn)
	switch sc.Turn {
	case at["close"]:
		speech = "Well, thank you both, this was generous."
	case at["end"]:
		speech = "*[the scene ends here]*"
	}
	if sc.Turn == at["broken"] || (sc.Turn == at["raw"] && !corr) {
		fmt.Print(speech)
		return 0, nil
	}
	fmt.Printf("<thinking>SECRET-%s-%d I keep this to myself.</thinking>\n<speech>%s</speech>\n", sc.Actor, sc.Turn, speech)
	return 0, nil
}

// envAndWait saves the environment (fake:env), then waits for the test's
// release file (fake:wait).
func envAndWait(dir string, p payload, d directives) error {
	if dir == "" {
		return fmt.Errorf("fake:env and fake:wait need %s", envDir)
	}
	if d.env {
		// Write then rename, so a test that sees the file sees all of it.
		name := filepath.Join(dir, p.EventID+"-"+p.Participant.ID+".env")
		if err := os.WriteFile(name+".tmp", []byte(strings.Join(os.Environ(), "\n")+"\n"), 0o600); err != nil {
			return fmt.Errorf("save environment: %w", err)
		}
		if err := os.Rename(name+".tmp", name); err != nil {
			return fmt.Errorf("save environment: %w", err)
		}
	}
	if !d.wait {
		return nil
	}
	release := filepath.Join(dir, p.EventID+".release")
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(release); err == nil {
			return nil
		}
	}
	return fmt.Errorf("fake:wait: no %s within 2 minutes", release)
}

// fileHash is "sha256:<hex>" of the file at path, "missing" when there is
// none (or no path).
func fileHash(path string) string {
	if path == "" {
		return "missing"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "missing"
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(b))
}
