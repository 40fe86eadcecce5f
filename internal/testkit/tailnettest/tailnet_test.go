package tailnettest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"tailscale.com/envknob"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/internal/testkit/tailnettest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// bridgeName is where serve --tailnet answers on the test tailnet.
const bridgeName = "agent-bridge." + tailnettest.Domain

// proc is a real agent-bridge process of the test, run under strace when
// the machine has it, so that every address it sends to is on record.
type proc struct {
	name           string // "agent-bridge serve", for messages
	cmd            *exec.Cmd
	stdout, stderr *testutil.Buffer
	trace          string // strace's output file, "" without strace
	done           chan error
	// ownDNS is whether the program saw a resolv.conf naming only
	// 127.0.0.1 (dnsNamespace).
	ownDNS bool
}

// dnsNamespace is the command that runs a program in a mount namespace of
// its own where /etc/resolv.conf names only 127.0.0.1, nil when this test
// may not make one (no unshare, or, not being root, no user namespace the
// kernel allows). Tailscale's ACME code asks the system's resolver for the
// dns-01 TXT record before it asks control to publish it (a best-effort
// check), and the machine's resolver is not on loopback.
func dnsNamespace(t *testing.T, dir string) []string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil
	}
	conf := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(conf, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := []string{unshare, "--mount", "--propagation", "private"}
	if os.Geteuid() != 0 {
		// Root of a user namespace of its own may mount in its mount
		// namespace, where the kernel lets users make one.
		ns = append(ns, "--user", "--map-root-user")
	}
	ns = append(ns, "--", "/bin/sh", "-c", `mount --bind "$0" /etc/resolv.conf && exec "$@"`, conf)
	if out, err := exec.Command(ns[0], append(ns[1:], "true")...).CombinedOutput(); err != nil {
		t.Logf("no mount namespace for a resolv.conf of the test's: %v %s", err, out)
		return nil
	}
	return ns
}

// start runs bin with args, its own HOME under dir and env besides.
func start(t *testing.T, dir, bin string, env []string, args ...string) *proc {
	t.Helper()
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: filepath.Base(bin) + " " + args[0], stdout: &testutil.Buffer{}, stderr: &testutil.Buffer{}, done: make(chan error, 1)}
	argv := append([]string{bin}, args...)
	if strace, err := exec.LookPath("strace"); err == nil {
		// Every system call that names a destination: connect for TCP
		// and connected UDP, the send calls for unconnected UDP.
		p.trace = filepath.Join(dir, "strace.txt")
		argv = append([]string{strace, "-f", "-qq", "-e", "trace=connect,sendto,sendmsg,sendmmsg", "-e", "signal=none", "-o", p.trace}, argv...)
	}
	if ns := dnsNamespace(t, dir); ns != nil {
		argv = append(ns, argv...)
		p.ownDNS = true
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Dir = dir
	p.cmd.Env = append([]string{"HOME=" + home, "PATH=/usr/bin:/bin"}, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("%s stdout:\n%s\nstderr:\n%s", p.name, p.stdout.String(), p.stderr.String())
		}
	})
	return p
}

// stop sends SIGTERM to the program (not to strace, which would detach
// and leave it running) and waits for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	pid := p.cmd.Process.Pid
	if p.trace != "" {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if f := strings.Fields(string(b)); err != nil || len(f) == 0 {
			t.Fatalf("the program strace runs: %v %q", err, b)
		} else if pid, err = strconv.Atoi(f[0]); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("%s after SIGTERM: %v", p.cmd.Args, err)
		}
	case <-time.After(60 * time.Second):
		t.Errorf("%s did not stop within 60 s of SIGTERM", p.cmd.Args)
	}
}

// logLines are the JSON log lines the process wrote with message msg.
func (p *proc) logLines(msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == msg {
			out = append(out, line)
		}
	}
	return out
}

// waitLog waits for a log line with message msg and returns its field key.
func (p *proc) waitLog(t *testing.T, msg, key string) string {
	t.Helper()
	var v string
	testutil.WaitFor(t, 3*time.Minute, fmt.Sprintf("the log line %q", msg), func() bool {
		select {
		case err := <-p.done:
			t.Fatalf("%s exited: %v", p.cmd.Args, err)
		default:
		}
		if ls := p.logLines(msg); len(ls) > 0 {
			v, _ = ls[0][key].(string)
			return true
		}
		return false
	})
	return v
}

// inetAddr matches the IPv4 and IPv6 destinations strace prints.
var inetAddr = regexp.MustCompile(`inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"`)

// outside returns the destinations outside loopback in p's trace. Where
// the program had the machine's resolv.conf (not root), port 53 of its
// resolvers is let through, and said.
func (p *proc) outside(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(p.trace)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	seen := 0
	for _, line := range strings.Split(string(b), "\n") {
		for _, m := range inetAddr.FindAllStringSubmatch(line, -1) {
			addr := m[1] + m[2]
			seen++
			switch {
			case addr == "127.0.0.1" || addr == "::1" || addr == "::ffff:127.0.0.1":
			case !p.ownDNS && strings.Contains(line, "htons(53)"):
				t.Logf("the machine's resolver was asked (no mount namespace for a resolv.conf of the test's): %s", line)
			default:
				out = append(out, strings.TrimSpace(line))
			}
		}
	}
	if seen == 0 {
		t.Errorf("strace recorded no destination of %s: the check would prove nothing", p.name)
	}
	t.Logf("%s: %d destinations, %d outside loopback", p.name, seen, len(out))
	return out
}

// TestTailnetOffline puts `serve --tailnet` (the real binary, its own HOME
// and data folder) on a tailnet that lives on 127.0.0.1: Tailscale's test
// control server, a DERP and STUN server, and the test's ACME authority.
// The login link serve prints, once, adds it to the tailnet; it gets its
// certificate through the production ACME path (dns-01 over control).
// From a "phone" node the UI and the API answer over HTTPS at the node's
// name, with HSTS, a Secure login cookie from the link `login-link`
// prints, and the gate strict about other names and origins; through
// Funnel (serve runs with --funnel; another node plays Tailscale's relay)
// the same name answers the internet and still asks for a token; a
// coordinator process on a third node serves an agent through the
// tailnet URL; `up --tailnet` on a fresh folder pairs the phone through
// its QR link, and, without --funnel, refuses Funnel's connections. Neither process sends a packet outside loopback (strace
// records every destination), and serve stops cleanly on SIGTERM.
func TestTailnetOffline(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary on a test tailnet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	began := time.Now()
	var err error
	tn := tailnettest.New(t)
	// The phone and the remote machine are nodes of this process: they
	// follow the same knobs as the processes (tsnet reads them here).
	for _, kv := range tn.Env() {
		k, v, _ := strings.Cut(kv, "=")
		envknob.SetenvForTest(t, k, v)
	}
	bins := t.TempDir()
	// .ci/release-check names the release archive's binary, to check
	// that the static build joins a tailnet too.
	bin := os.Getenv("AGENT_BRIDGE_TAILNET_BIN")
	if bin == "" {
		if bin, err = testutil.GoBuild(ctx, "./cmd/agent-bridge", bins, false); err != nil {
			t.Fatal(err)
		}
	}
	fake, err := testutil.GoBuild(ctx, "./internal/testkit/fakeadapter", bins, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s, built in %s", bin, time.Since(began).Round(time.Second))

	dir := t.TempDir()
	db := filepath.Join(dir, "data", "bridge.db")
	serve := start(t, dir, bin, tn.Env(), "serve", "--addr", "127.0.0.1:0", "--db", db, "--tailnet", "--funnel", "--tailnet-control-url", tn.ControlURL)
	const loginMsg = "to put the bridge on your tailnet, open this link; the bridge waits for it"
	login := serve.waitLog(t, loginMsg, "url")
	tn.Login(t, login)
	local := serve.waitLog(t, "agent-bridge serving", "url")
	if got := serve.waitLog(t, "on the tailnet", "url"); got != "https://"+bridgeName {
		t.Fatalf("serve is on the tailnet at %q, want https://%s", got, bridgeName)
	}
	if on := serve.logLines("on the tailnet")[0]["funnel"]; on != true {
		t.Errorf("serve --funnel logs funnel=%v, want true", on)
	}
	if n := len(serve.logLines(loginMsg)); n != 1 {
		t.Errorf("the login link was printed %d times, want once", n)
	}
	if got := tn.Issued(); len(got) != 1 || got[0] != bridgeName {
		t.Errorf("the ACME authority certified %v, want [%s]", got, bridgeName)
	}
	t.Logf("serve on the tailnet after %s", time.Since(began).Round(time.Second))
	tokenBytes, err := os.ReadFile(filepath.Join(dir, "data", "token"))
	if err != nil {
		t.Fatal(err)
	}
	person := strings.TrimSpace(string(tokenBytes))

	phone := tn.Node(t, ctx, "phone")
	checkPhone(t, tn.Client(phone), person)
	checkLoginLink(t, tn.Client(phone), bin, local, filepath.Join(dir, "data", "token"))
	relay := tn.Node(t, ctx, "funnel-relay")
	checkFunnel(t, tn.FunnelClient(relay), person)

	remote := tn.Node(t, ctx, "workstation")
	coord := startRemoteCoordinator(t, tn, tn.Proxy(t, remote), bin, fake, local, person)
	checkRemoteAgent(t, ctx, client.New(local, client.WithToken(person)))

	coord.stop(t)
	serve.stop(t)
	up := checkUp(t, tn, tn.Client(phone), tn.FunnelClient(relay), bin)
	for _, p := range []*proc{serve, coord, up} {
		if p.trace == "" {
			t.Log("strace is not installed: the destinations were not checked")
			continue
		}
		if out := p.outside(t); len(out) > 0 {
			t.Errorf("%s sent outside loopback:\n%s", p.name, strings.Join(out, "\n"))
		}
	}
	t.Logf("the tailnet test took %s", time.Since(began).Round(time.Second))
}

// checkPhone asks the bridge from the phone node: the UI and the API
// answer at its name over HTTPS with HSTS; another name, or a write from
// another origin, is refused.
func checkPhone(t *testing.T, c *http.Client, person string) {
	t.Helper()
	base := "https://" + bridgeName
	get := func(url, host string, auth bool) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if host != "" {
			req.Host = host
		}
		if auth {
			req.Header.Set("Authorization", "Bearer "+person)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s from the phone: %v", url, err)
		}
		resp.Body.Close()
		return resp
	}
	for _, path := range []string{"/ui/", "/threads"} {
		resp := get(base+path, "", true)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Strict-Transport-Security") == "" {
			t.Errorf("GET %s%s from the phone = %s, HSTS %q", base, path, resp.Status, resp.Header.Get("Strict-Transport-Security"))
		}
	}
	if resp := get(base+"/threads", "", false); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /threads from the phone without a token = %s, want 401", resp.Status)
	}
	if resp := get(base+"/threads", "evil.example", true); resp.StatusCode == http.StatusOK {
		t.Errorf("GET /threads with Host evil.example = %s, want a refusal", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/threads", strings.NewReader(`{"name":"from elsewhere"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+person)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("POST /threads from origin https://evil.example = %s, want 403", resp.Status)
	}
}

// checkFunnel asks the bridge from the internet, through Funnel (serve
// --funnel): the UI answers at the same name over HTTPS, and the API
// still needs a token.
func checkFunnel(t *testing.T, c *http.Client, person string) {
	t.Helper()
	base := "https://" + bridgeName
	get := func(path string, auth bool) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer "+person)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s%s through Funnel: %v", base, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/ui/", false); got != http.StatusOK {
		t.Errorf("GET /ui/ through Funnel = %d, want 200", got)
	}
	if got := get("/threads", false); got != http.StatusUnauthorized {
		t.Errorf("GET /threads through Funnel without a token = %d, want 401", got)
	}
	if got := get("/threads", true); got != http.StatusOK {
		t.Errorf("GET /threads through Funnel with the token = %d, want 200", got)
	}
}

// checkLoginLink runs `agent-bridge login-link` on the bridge's machine
// (over loopback): the link it prints is at the tailnet name, and opened
// on the phone as the UI page does it logs the phone in once.
func checkLoginLink(t *testing.T, c *http.Client, bin, local, tokenFile string) {
	t.Helper()
	out, err := exec.Command(bin, "login-link", "--url", local, "--token-file", tokenFile).Output()
	if err != nil {
		t.Fatalf("login-link: %v", err)
	}
	openOnPhone(t, c, strings.TrimSpace(string(out)), "https://"+bridgeName, "/ui/login#code=", "/auth/login")
}

// openOnPhone opens link (base + page + code) on the phone as the UI page
// does: the page answers, the code posted from the page's origin to
// endpoint buys a Secure, HttpOnly login cookie that opens the API, and
// the same code a second time is refused.
func openOnPhone(t *testing.T, c *http.Client, link, base, page, endpoint string) {
	t.Helper()
	code, ok := strings.CutPrefix(link, base+page)
	if !ok {
		t.Fatalf("the link is %q, want %s%s…", link, base, page)
	}
	jar, _ := cookiejar.New(nil)
	c = &http.Client{Transport: c.Transport, Timeout: c.Timeout, Jar: jar}
	pageURL, _, _ := strings.Cut(base+page, "#")
	resp, err := c.Get(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s from the phone = %s", pageURL, resp.Status)
	}
	post := func() *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+endpoint, strings.NewReader(`{"code":"`+code+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", base)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp = post()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s with the link's code from the phone = %s", endpoint, resp.Status)
	}
	if cs := resp.Cookies(); len(cs) != 1 || !cs[0].Secure || !cs[0].HttpOnly {
		t.Errorf("login cookie = %+v, want one Secure, HttpOnly cookie", cs)
	}
	threads, err := c.Get(base + "/threads")
	if err != nil {
		t.Fatal(err)
	}
	threads.Body.Close()
	if threads.StatusCode != http.StatusOK {
		t.Errorf("GET /threads with the phone's login cookie = %s", threads.Status)
	}
	if again := post(); again.StatusCode != http.StatusUnauthorized {
		t.Errorf("the link's code used twice = %s, want 401", again.Status)
	}
}

// startRemoteCoordinator runs `agent-bridge coordinator` as a process of
// another machine whose bridge_url is the tailnet URL: it reaches it
// through proxy (that machine's Tailscale) and trusts the tailnet's
// certificates as a machine trusts Let's Encrypt's.
func startRemoteCoordinator(t *testing.T, tn *tailnettest.Tailnet, proxy, bin, fake, local, person string) *proc {
	t.Helper()
	ctx := context.Background()
	tok, err := client.New(local, client.WithToken(person)).CreateToken(ctx, agentbridge.TokenInput{Scope: agentbridge.ScopeCoordinator, Name: "workstation"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	status := testutil.FreeAddr(t)
	cfg, _ := json.Marshal(map[string]any{
		"bridge_url": "https://" + bridgeName, "bridge_token": tok.Secret, "coordinator_id": "workstation", "host": "workstation",
		"status_addr": status, "agents": map[string]any{"alice": map[string]any{"command": []string{fake}}},
	})
	cfgPath := filepath.Join(dir, "coordinator.config.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, dir, bin, []string{"HTTPS_PROXY=" + proxy, "SSL_CERT_FILE=" + tn.CAFile, "FAKE_ADAPTER_DIR=" + dir},
		"coordinator", "--config", cfgPath, "--state", filepath.Join(dir, "coordinator.db"))
	testutil.WaitFor(t, 2*time.Minute, "the remote coordinator to follow the bridge's log", func() bool {
		resp, err := http.Get("http://" + status + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h struct{ Following bool }
		return json.NewDecoder(resp.Body).Decode(&h) == nil && h.Following
	})
	return p
}

// checkRemoteAgent posts to alice, whom only the remote coordinator
// serves, and waits for her reply.
func checkRemoteAgent(t *testing.T, ctx context.Context, cl *client.Client) {
	t.Helper()
	th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "over the tailnet"})
	if err != nil {
		t.Fatal(err)
	}
	invite, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": "alice", "profile": map[string]any{"client": "fake", "model": "m"}}})
	if _, err := cl.Append(ctx, th.ID, agentbridge.EventInput{Type: "control", From: "user", Content: invite}, ""); err != nil {
		t.Fatal(err)
	}
	hello, _ := json.Marshal("hello over the tailnet")
	if _, err := cl.Append(ctx, th.ID, agentbridge.EventInput{From: "user", To: "alice", Content: hello}, ""); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 2*time.Minute, "alice's reply through the tailnet", func() bool {
		evs, err := cl.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: th.ID, After: -1, Limit: 100})
		if err != nil {
			return false
		}
		for _, e := range evs {
			if e.From == "alice" && strings.Contains(string(e.Content), "alice got: hello over the tailnet") {
				return true
			}
		}
		return false
	})
}

// checkUp runs `up --tailnet` in an empty folder as on a fresh laptop: it
// prints the login link once, and once that is opened, its summary with a
// pairing QR code whose link, opened on the phone, pairs it; it stops
// cleanly. Without --funnel it is not on the internet: Funnel's
// connections are refused.
func checkUp(t *testing.T, tn *tailnettest.Tailnet, phone, internet *http.Client, bin string) *proc {
	t.Helper()
	dir := t.TempDir()
	up := start(t, dir, bin, tn.Env(), "up", "--addr", "127.0.0.1:0", "--status-addr", "127.0.0.1:0",
		"--tailnet", "--tailnet-hostname", "laptop", "--tailnet-control-url", tn.ControlURL)
	const ask = "To put agent-bridge on your tailnet, open this link (up waits for it):\n  "
	line := func(after string) string {
		var v string
		testutil.WaitFor(t, 3*time.Minute, fmt.Sprintf("up to print %q", after), func() bool {
			out := up.stdout.String()
			if i := strings.Index(out, after); i >= 0 {
				if rest := out[i+len(after):]; strings.Contains(rest, "\n") {
					v, _, _ = strings.Cut(rest, "\n")
					return true
				}
			}
			select {
			case err := <-up.done:
				t.Fatalf("up exited: %v", err)
			default:
			}
			return false
		})
		return v
	}
	tn.Login(t, line(ask))
	base := "https://laptop." + tailnettest.Domain
	if got := line("On your tailnet at "); got != base {
		t.Errorf("up says it is on the tailnet at %q, want %s", got, base)
	}
	line("Scan this with your phone's camera")
	if !strings.Contains(up.stdout.String(), "█") {
		t.Error("up printed no QR code")
	}
	code := line("\n" + base + "/ui/#pair=")
	if n := strings.Count(up.stdout.String(), ask); n != 1 {
		t.Errorf("up printed the login link %d times, want once", n)
	}
	openOnPhone(t, phone, base+"/ui/#pair="+code, base, "/ui/#pair=", "/auth/pair/redeem")
	if resp, err := internet.Get(base + "/ui/"); err == nil {
		resp.Body.Close()
		t.Errorf("GET %s/ui/ through Funnel without --funnel = %s, want the connection refused", base, resp.Status)
	} else if !strings.Contains(err.Error(), "refused the connection: 403") {
		t.Errorf("GET %s/ui/ through Funnel without --funnel: %v, want the node's refusal", base, err)
	}
	up.stop(t)
	return up
}
