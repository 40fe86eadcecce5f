// Package pgtest starts a real PostgreSQL for tests: initdb and pg_ctl of
// Debian's postgresql package, in a temporary folder, on a free loopback
// port, with its unix socket in that folder. One server serves a test
// package (see Server.Run) and every test gets a database of its own.
//
// Without the binaries the tests skip with the reason; with CI=true they
// fail instead, so that CI cannot pass without running them. initdb refuses
// to run as root, so as root the server runs as the postgres user (the
// package's own) through runuser.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BinDirEnv names the environment variable that points at the folder of
// initdb and pg_ctl when they are not in Debian's place.
const BinDirEnv = "PGTEST_BINDIR"

// Server is a PostgreSQL the tests of one package share. The zero value is
// not usable; make one with New.
type Server struct {
	once    sync.Once
	err     error // why there is no server (skip or fail)
	missing bool  // err is "binaries not installed"
	dir     string
	bin     string
	port    int
	asUser  []string // command prefix running as the postgres user, when root
	durable bool     // fsync and synchronous commit on (benchmarks)
	// lifeline is the write end of the watchdog's pipe, and watchdog the
	// process that stops the server when it reads the pipe's end (watch).
	lifeline *os.File
	watchdog *exec.Cmd

	mu  sync.Mutex
	dbs int
}

// New returns a server that starts on first use. It trades durability for
// speed (fsync off): test data need not survive a power cut.
func New() *Server { return &Server{} }

// NewDurable returns a server with PostgreSQL's default durability (fsync,
// synchronous commit), for benchmarks that compare it with SQLite's.
func NewDurable() *Server { return &Server{durable: true} }

// Run runs the package's tests and then stops the server if one started.
// Call it from TestMain: os.Exit(srv.Run(m)).
func (s *Server) Run(m *testing.M) int {
	code := m.Run()
	s.Stop()
	return code
}

// Database creates a fresh, empty database for t and returns its
// postgres:// URL. It skips t under -short, and (failing it under
// CI=true instead) when PostgreSQL is not installed; it fails t when the
// server cannot start.
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs PostgreSQL; -short leaves it out")
	}
	s.once.Do(func() { s.err = s.start() })
	if s.err != nil {
		if s.missing && os.Getenv("CI") != "true" {
			t.Skipf("PostgreSQL tests skipped: %v", s.err)
		}
		t.Fatalf("PostgreSQL for tests: %v", s.err)
	}
	s.mu.Lock()
	s.dbs++
	name := fmt.Sprintf("t%d_%s", s.dbs, sanitize(t.Name()))
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		t.Fatalf("connect to test PostgreSQL: %v", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	return s.URL(name)
}

// URL returns the postgres:// URL of database name on the server.
func (s *Server) URL(name string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), Path: "/" + name,
		RawQuery: "sslmode=disable"}
	return u.String()
}

// sanitize turns a test name into part of a database name (at most 63
// bytes in all).
func sanitize(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	out := b.String()
	if len(out) > 48 {
		out = out[:48]
	}
	return out
}

// BinDir is the folder of the PostgreSQL programs the test server runs
// from, for tests that run others of them (pg_dump, pg_restore).
func BinDir() (string, error) { return binDir() }

// binDir finds initdb and pg_ctl: BinDirEnv, then the newest of Debian's
// /usr/lib/postgresql/*/bin, then PATH.
func binDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("%s=%s holds no initdb", BinDirEnv, d)
		}
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("initdb not found (install Debian's postgresql package, or set " + BinDirEnv + ")")
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func (s *Server) start() error {
	if runtime.GOOS == "windows" {
		s.missing = true
		return errors.New("not supported on Windows")
	}
	bin, err := binDir()
	if err != nil {
		s.missing = true
		return err
	}
	s.bin = bin
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return fmt.Errorf("temp folder: %w", err)
	}
	s.dir = dir
	if os.Geteuid() == 0 {
		// initdb will not run as root: hand the folder to the postgres user
		// and run the server as it.
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return fmt.Errorf("chown temp folder: %w", err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			return fmt.Errorf("running as root needs runuser: %w", err)
		}
		s.asUser = []string{runuser, "-u", "postgres", "--"}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.command("initdb", "-D", data, "-U", "postgres", "--auth=trust",
		"--no-sync", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, out)
	}
	for attempt := 0; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.port = port
		out, err := s.command("pg_ctl", "start", "-w", "-t", "60", "-D", data,
			"-l", filepath.Join(dir, "log"), "-o", s.serverOptions()).CombinedOutput()
		if err == nil {
			return s.watch()
		}
		if attempt == 4 {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			return fmt.Errorf("pg_ctl start: %w: %s\n%s", err, out, log)
		}
	}
}

// serverOptions are the postgres options of every start.
func (s *Server) serverOptions() string {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300", s.port, s.dir)
	if !s.durable {
		opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	return opts
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, s.asUser...), filepath.Join(s.bin, name)), args...)
	return exec.Command(argv[0], argv[1:]...)
}

// watch starts the server's watchdog: a shell that waits for the end of a
// pipe whose write end only this process holds (Go opens every file
// close-on-exec, so no child inherits it), then stops the server and
// removes its folder. However this process ends, a test timeout's kill or
// kill -9 included, the kernel closes the pipe: no PostgreSQL outlives the
// tests that started it. The shell ignores the terminal's signals, which
// would otherwise end it before this process.
func (s *Server) watch() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("watchdog pipe: %w", err)
	}
	defer func() { _ = r.Close() }()
	stop := s.command("pg_ctl", "stop", "-w", "-m", "immediate", "-D", filepath.Join(s.dir, "data"))
	cmd := exec.Command("/bin/sh", append([]string{"-c",
		`trap '' INT HUP TERM QUIT; read -r _; "$@" >/dev/null 2>&1; rm -rf "$0"`, s.dir}, stop.Args...)...)
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		_ = stop.Run()
		return fmt.Errorf("start the watchdog: %w", err)
	}
	s.lifeline, s.watchdog = w, cmd
	return nil
}

// Stop stops the server (immediately: test data need no clean shutdown)
// and removes its folder: it lets its watchdog go and waits for it.
func (s *Server) Stop() {
	if s.watchdog != nil {
		_ = s.lifeline.Close()
		_ = s.watchdog.Wait()
		return
	}
	if s.dir != "" {
		_ = os.RemoveAll(s.dir)
	}
}

// Log returns what the server has logged so far (its -l file): errors
// such as "deadlock detected", with the statements involved.
func (s *Server) Log(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, "log"))
	if err != nil {
		t.Fatalf("read the PostgreSQL log: %v", err)
	}
	return string(b)
}

// Halt stops the running server and keeps its data, so that a test can
// watch its clients through a database outage; Resume starts it again.
// mode is pg_ctl's shutdown mode: "fast" (a clean stop, as a restart by
// an operator) or "immediate" (a crash: recovery replays the WAL at the
// next start). Tests that halt a server use one of their own, not the
// package's shared one; one that crashes it ("immediate") and counts what
// survived uses NewDurable, since New's server (synchronous_commit off)
// loses commits it already acknowledged in a crash.
func (s *Server) Halt(t testing.TB, mode string) {
	t.Helper()
	if out, err := s.command("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", filepath.Join(s.dir, "data")).CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl stop -m %s: %v: %s", mode, err, out)
	}
}

// Resume starts a halted server again on the same port and waits until
// it accepts connections.
func (s *Server) Resume(t testing.TB) {
	t.Helper()
	if out, err := s.command("pg_ctl", "start", "-w", "-t", "60", "-D", filepath.Join(s.dir, "data"),
		"-l", filepath.Join(s.dir, "log"), "-o", s.serverOptions()).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		t.Fatalf("pg_ctl start: %v: %s\n%s", err, out, log)
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// AdvisoryLocks counts the advisory locks held on the database at url
// (a coordinator's lease is one), or -1 when it cannot be asked: while
// the server restarts, say.
func AdvisoryLocks(url string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return -1
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n); err != nil {
		return -1
	}
	return n
}
