package uitest

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	kit "github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// waitTimeout bounds every wait for the browser or a daemon. It is generous
// because eight people share two cores; a passing run waits far less.
const waitTimeout = 30 * time.Second

// progs are the programs the tests run, built once per test binary into
// a folder TestMain makes and removes.
var progs *kit.Programs

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "uitest-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	progs = kit.NewPrograms(dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func binaries(t testing.TB) (bridgeBin, fakeBin string) {
	t.Helper()
	return progs.Build(t, kit.AgentBridge), progs.Build(t, kit.FakeAdapter)
}

// chromiumPath finds the browser, skipping the test when it is missing
// (failing instead under CI, where it must be installed).
func chromiumPath(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("drives Chromium; -short leaves it out")
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed, and CI is set: install it (apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); skipping browser tests")
	return ""
}

// proc is a daemon subprocess whose output goes to a log file that is
// printed when the test fails.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(t testing.TB, name string, env []string, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("--- %s log ---\n%s", name, b)
		}
	})
	return p
}

// stop sends SIGTERM and waits for the exit, killing after the deadline.
func (p *proc) stop(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(waitTimeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		t.Errorf("%s did not stop within %v of SIGTERM", p.name, waitTimeout)
	}
}

// stack is a running bridge (and optionally coordinator) for one test.
type stack struct {
	t     testing.TB
	bin   string
	fake  string
	dir   string
	addr  string
	url   string
	db    string
	token string
	serve *proc
	coord *proc
	// serveArgs are extra arguments of serve.
	serveArgs []string
	// ownToken runs serve as a user does, neither --open nor a token
	// given: it makes its person token next to the database, which
	// startServe then reads into token.
	ownToken bool
	// statusURL is the coordinator's status server (its runs dashboard).
	statusURL string
	// agents are agent entries startCoordinator adds to "fake", by key.
	agents map[string]any
	// config are other keys of the coordinator's config (workspaces,
	// permission_timeout_s…).
	config map[string]any
}

func newStack(t testing.TB) *stack {
	t.Helper()
	chromiumPath(t) // skip before spending a build when there is no browser
	bridgeBin, fakeBin := binaries(t)
	dir := t.TempDir()
	addr := testutil.FreeAddr(t)
	s := &stack{t: t, bin: bridgeBin, fake: fakeBin, dir: dir, addr: addr, url: "http://" + addr, db: filepath.Join(dir, "bridge.db")}
	return s
}

// allowLocalPush has serve push to a push service on this machine (the
// fake one, on http://127.0.0.1), which a bridge refuses by default.
func (s *stack) allowLocalPush() {
	s.t.Helper()
	cfg := filepath.Join(s.dir, "bridge.json")
	if err := os.WriteFile(cfg, []byte(`{"notify":{"allow_private_endpoints":true}}`), 0o600); err != nil {
		s.t.Fatal(err)
	}
	s.serveArgs = append(s.serveArgs, "--bridge-config", cfg)
}

// startServe runs `agent-bridge serve` on the stack's fixed address and
// database, so a restart comes back at the same place.
func (s *stack) startServe() {
	s.t.Helper()
	var env []string
	args := append([]string{"serve", "--addr", s.addr, "--db", s.db}, s.serveArgs...)
	switch {
	case s.token != "":
		env = append(env, "BRIDGE_TOKEN="+s.token)
	case s.ownToken:
	default:
		// The page tests that give no token run the v0 way: the login
		// is tested with a token (TestTokenLogin) and a login link.
		args = append(args, "--open")
	}
	s.serve = startProc(s.t, "serve", env, s.bin, args...)
	testutil.WaitFor(s.t, waitTimeout, "the bridge to answer /healthz", func() bool {
		res, err := http.Get(s.url + "/healthz")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	if s.ownToken {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(s.db), "token"))
		if err != nil {
			s.t.Fatal(err)
		}
		s.token = strings.TrimSpace(string(b))
	}
}

// startCoordinator runs the coordinator with one agent entry, "fake", whose
// client is "fake": every invited participant with client fake is served by
// the fake adapter; s.agents adds more entries.
func (s *stack) startCoordinator() {
	s.t.Helper()
	statusAddr := testutil.FreeAddr(s.t)
	s.statusURL = "http://" + statusAddr
	cfg := map[string]any{
		"bridge_url":           s.url,
		"startup_mode":         "resume",
		"status_addr":          statusAddr,
		"presence_heartbeat_s": 1,
		"agents": map[string]any{
			"fake": map[string]any{"command": []string{s.fake}, "client": "fake"},
		},
	}
	for k, v := range s.agents {
		cfg["agents"].(map[string]any)[k] = v
	}
	for k, v := range s.config {
		cfg[k] = v
	}
	if s.ownToken {
		// The person token serve made: the coordinator's, and its status
		// API then asks browsers for a sign-in as the bridge does.
		cfg["bridge_token"] = s.token
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	path := filepath.Join(s.dir, "coordinator.config.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		s.t.Fatal(err)
	}
	var env []string
	if s.token != "" {
		env = append(env, "BRIDGE_TOKEN="+s.token)
	}
	s.coord = startProc(s.t, "coordinator", env, s.bin, "coordinator", "--config", path, "--state", filepath.Join(s.dir, "coordinator.db"))
	// Following, not only answering: a fresh coordinator starts at the
	// log's end, so a message posted before it read that end would be
	// skipped as history.
	testutil.WaitFor(s.t, waitTimeout, "the coordinator to follow the log", func() bool {
		res, err := http.Get(s.statusURL + "/healthz")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var h struct{ Following bool }
		return res.StatusCode == http.StatusOK && json.NewDecoder(res.Body).Decode(&h) == nil && h.Following
	})
}

// api calls the bridge's HTTP API and decodes the answer into out (when
// non-nil); it returns the status code and the error body, if any.
func (s *stack) api(method, path string, body, out any) (int, apiError) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		var e struct {
			Error apiError `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return res.StatusCode, e.Error
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return res.StatusCode, apiError{}
}

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// mustAPI is api that fails the test on an error status.
func (s *stack) mustAPI(method, path string, body, out any) {
	s.t.Helper()
	if code, e := s.api(method, path, body, out); code >= 300 {
		s.t.Fatalf("%s %s: %d %s: %s", method, path, code, e.Code, e.Message)
	}
}

func (s *stack) newThread(name string) string {
	s.t.Helper()
	var res struct {
		ID string `json:"id"`
	}
	s.mustAPI(http.MethodPost, "/threads", map[string]any{"name": name, "from": "user"}, &res)
	return res.ID
}

func (s *stack) post(thread string, ev map[string]any) map[string]any {
	s.t.Helper()
	var res struct {
		Event map[string]any `json:"event"`
	}
	s.mustAPI(http.MethodPost, "/threads/"+thread+"/events", ev, &res)
	return res.Event
}

func (s *stack) invite(thread, id, nickname string) {
	s.t.Helper()
	profile := map[string]any{"client": "fake", "model": "fake-1"}
	if nickname != "" {
		profile["nickname"] = nickname
	}
	s.post(thread, map[string]any{"type": "control", "from": "user", "content": map[string]any{
		"invite": map[string]any{"participant_id": id, "profile": profile},
	}})
}

// browser is one Chromium tab.
type browser struct {
	t   testing.TB
	ctx context.Context
}

func newBrowser(t testing.TB) *browser {
	t.Helper()
	exe := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.UserDataDir(t.TempDir()),
		// Chromium keeps its singleton socket folder in TMPDIR, and a
		// browser killed with its test leaves it behind.
		chromedp.Env("TMPDIR=" + t.TempDir()),
		chromedp.WindowSize(1400, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: errorHook})
		return err
	}))
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &browser{t: t, ctx: ctx}
	t.Cleanup(func() {
		if errs := eval[[]string](b, `window.__pageErrors ?? (location.protocol === "http:" ? ["the error hook did not run"] : [])`); len(errs) > 0 {
			t.Errorf("the page reported errors: %q", errs)
		}
	})
	return b
}

// errorHook runs before the page's own scripts (the DevTools protocol is not
// bound by the CSP) and records uncaught errors, unhandled rejections and
// CSP violations, so that every test also proves the UI ran cleanly under
// its own policy.
const errorHook = `window.__pageErrors = [];
addEventListener("error", (e) => __pageErrors.push("error: " + e.message));
addEventListener("unhandledrejection", (e) => __pageErrors.push("unhandled rejection: " + String(e.reason)));
document.addEventListener("securitypolicyviolation", (e) => __pageErrors.push("CSP violation: " + e.violatedDirective + " " + e.blockedURI));`

// run performs actions, failing the test on error; each call is bounded.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression through the DevTools protocol
// (which the page's CSP does not restrict) and decodes its JSON value.
func eval[T any](b *browser, expr string, opts ...chromedp.EvaluateOption) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitJS polls a JavaScript condition until it is true. chromedp.Poll
// builds its predicate with new Function, which the UI's CSP forbids, so
// the polling happens here.
func (b *browser) waitJS(what, cond string) {
	b.t.Helper()
	testutil.WaitFor(b.t, waitTimeout, what, func() bool {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		defer cancel()
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+cond+")"))
		return err == nil && ok
	})
}

// text returns the textContent of the first element matching sel.
func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel))
}

// eventText is a JS expression: the body text of the events of the open
// thread, joined by newlines, for matching replies.
const eventsText = `Array.from(document.querySelectorAll("#event-list .event:not(.future) .event-body")).map(e => e.textContent).join("\n")`

// jsString quotes s for JavaScript.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// countEvents is a JS expression counting rendered message events whose
// body is exactly text.
func countEvents(text string) string {
	return fmt.Sprintf(`Array.from(document.querySelectorAll("#event-list .event-body")).filter(e => e.textContent === %s).length`, jsString(text))
}

// screenshot saves the current view as a PNG in $ARTIFACTS_DIR (or the
// test's temp dir) and returns its bytes.
func (b *browser) screenshot(name string) []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, waitTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		dir = b.t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot saved to %s", path)
	return png
}

// contains reports whether the JS string expression expr contains sub.
func contains(expr, sub string) string {
	return fmt.Sprintf(`(%s).includes(%s)`, expr, jsString(sub))
}

// pressEnter sends Enter (with Shift when shift is set) to the focused
// element the way a real keyboard does: one keyDown carrying the text, so
// that a keydown handler's preventDefault suppresses the newline.
// chromedp's KeyEvent sends the text in a separate char event, which
// inserts it whatever the page's handler decided.
func (b *browser) pressEnter(sel string, shift bool) {
	b.t.Helper()
	var mods int64
	if shift {
		mods = int64(chromedp.ModifierShift)
	}
	down := input.DispatchKeyEventParams{Type: input.DispatchKeyEventTypeKeyDown, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13, Text: "\r", UnmodifiedText: "\r", Modifiers: mods}
	up := down
	up.Type, up.Text, up.UnmodifiedText = input.DispatchKeyEventTypeKeyUp, "", ""
	b.run("press Enter in "+sel,
		chromedp.Focus(chromedp.CSS(sel)),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			for _, p := range []input.DispatchKeyEventParams{down, up} {
				if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, p); err != nil {
					return fmt.Errorf("dispatch %s: %w", p.Type, err)
				}
			}
			return nil
		}),
	)
}

// setValue sets a form field's value and fires its input event, as typing
// would.
func (b *browser) setValue(sel, v string) {
	b.t.Helper()
	eval[bool](b, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %s; e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); return true })()`, sel, jsString(v)))
}

// threadID returns the id of the thread open in the page.
func (b *browser) threadID() string {
	b.t.Helper()
	return eval[string](b, `decodeURIComponent(location.pathname.split("/")[3] || "")`)
}

// click clicks the element matching the CSS selector sel once it is shown,
// enabled and has stopped moving. chromedp computes the click's position
// from the element's box and then sends the mouse events; if the panel
// reflows in between (a state refresh, a button hidden), the click lands
// beside the element, which a person would not do either.
func (b *browser) click(what, sel string) {
	b.t.Helper()
	q, err := json.Marshal(sel)
	if err != nil {
		b.t.Fatal(err)
	}
	// Not still while a CSS transition runs (a drawer sliding in or out):
	// two readings of a moving element in one frame agree, and a drawer
	// sliding out still takes the taps on what lies under it.
	box := `(() => { const e = document.querySelector(` + string(q) + `);
		if (!e || e.disabled || e.offsetParent === null) return "";
		if (document.getAnimations().some((a) => a instanceof CSSTransition && a.playState === "running")) return "";
		const r = e.getBoundingClientRect(); return [r.x, r.y, r.width, r.height].join(","); })()`
	// A click lands where the element was: the page may still move it
	// (a receipt line drawn above it a moment later), and the click then
	// hits whatever is there instead. So the element records the clicks
	// that reach it, and a click that does not is tried again.
	arm := `(() => { const e = document.querySelector(` + string(q) + `); if (!e) return false;
		window.__abClicked = false; e.addEventListener("click", () => { window.__abClicked = true; }, { once: true, capture: true }); return true; })()`
	for attempt := 1; ; attempt++ {
		last := ""
		testutil.WaitFor(b.t, waitTimeout, what+": "+sel+" shown and still", func() bool {
			ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
			defer cancel()
			r, err := chromedp.Run(ctx, chromedp.Evaluate[string](box))
			still := err == nil && r != "" && r == last
			last = r
			return still
		})
		if !eval[bool](b, arm) {
			continue
		}
		b.run(what, chromedp.Click(chromedp.CSS(sel)))
		// Unset after a click that loaded another page: it reached it.
		if eval[bool](b, `window.__abClicked !== false`) {
			return
		}
		if attempt == 3 {
			b.t.Fatalf("%s: three clicks on %s did not reach it (the page kept moving it)", what, sel)
		}
	}
}

// openInvite opens the panel's "Invite an agent" fold, as a person taps
// it, so that its fields can be filled.
func (b *browser) openInvite() {
	b.t.Helper()
	b.click("open the invite form", "details.invite > summary")
	b.waitJS("the invite form open", `document.querySelector("details.invite").open`)
}
