package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/bridge/postgres"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/ledger"
	"github.com/agent-bridge/agent-bridge/internal/testkit/pgtest"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// pg is the PostgreSQL this package's tests share (one database per test).
var pg = pgtest.New()

// TestDBSchemes checks --db's parsing: an unsupported scheme:// exits 2
// naming the supported ones and creates nothing; backup and restore on a
// PostgreSQL URL exit 2 pointing at pg_dump/pg_restore.
func TestDBSchemes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{
		{"serve", "--db", "mysql://db.example/bridge"},
		{"backup", "--to", "b.db", "--db", "sqlite://x"},
		{"doctor", "--db", "ftp://x"},
	} {
		m, _, stderr := opsMain(nil)
		code := exitCode(stderr, m.Run(ctx, args))
		if code != 2 || !strings.Contains(stderr.String(), "postgres://") {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming postgres://", args, code, stderr.String())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused --db values created %v", entries)
	}
	for _, args := range [][]string{
		{"backup", "--to", "b.dump", "--db", "postgres://u:secret@127.0.0.1:1/bridge"},
		{"restore", "--from", "b.dump", "--db", "postgresql://127.0.0.1:1/bridge"},
	} {
		m, _, stderr := opsMain(nil)
		code := exitCode(stderr, m.Run(ctx, args))
		if code != 2 || !strings.Contains(stderr.String(), "pg_dump") || !strings.Contains(stderr.String(), "pg_restore") {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming pg_dump and pg_restore", args, code, stderr.String())
		}
	}
	if got := maskURL("postgres://u:secret@h:5432/db?sslmode=disable"); strings.Contains(got, "secret") {
		t.Errorf("redactURL kept the password: %s", got)
	}
}

// TestDoctorPostgres checks doctor's PostgreSQL check against a real
// server: before the bridge migrated it, after, and when unreachable.
func TestDoctorPostgres(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pg.Database(t)
	r := checkPostgres(ctx, "bridge database", url, postgres.SchemaVersions)
	if r.Status != checkWarn || !strings.Contains(r.Detail, "schema version 0") {
		t.Errorf("fresh database: %+v, want a warning at schema version 0", r)
	}
	s, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	r = checkPostgres(ctx, "bridge database", url, postgres.SchemaVersions)
	if r.Status != checkOK || !strings.Contains(r.Detail, "PostgreSQL 1") {
		t.Errorf("migrated database: %+v, want ok with the server version", r)
	}
	dsn := pg.Database(t)
	db, err := ledger.Open(ctx, dsn, "bridge-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	if r := checkPostgres(ctx, "coordinator state", dsn, ledgerVersions); r.Status != checkOK {
		t.Errorf("migrated ledger: %+v, want ok", r)
	}
	r = checkPostgres(ctx, "bridge database", "postgres://nobody:pw@127.0.0.1:1/x?connect_timeout=2", postgres.SchemaVersions)
	if r.Status != checkFail || !strings.Contains(r.Detail, "unreachable") || strings.Contains(r.Detail, "pw@") {
		t.Errorf("unreachable database: %+v, want FAIL without the password", r)
	}
}

// TestTwoBridgesOneDatabase runs two real `serve` processes on one
// PostgreSQL database: an event appended through one reaches the other's
// SSE subscribers, and followers of /events on both, running while
// writers post through both, see every event exactly once with no gap in
// gseq (gseq is handed out in commit order, without holes).
func TestTwoBridgesOneDatabase(t *testing.T) {
	stack.Heavy(t)
	url := pg.Database(t)
	bin := buildServeBinary(t)
	a, b := startServe(t, bin, url), startServe(t, bin, url)
	ca, cb := client.New(a.URL, client.WithToken(a.Token)), client.New(b.URL, client.WithToken(b.Token))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	th, err := ca.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cb.Thread(ctx, th.ID); err != nil || got.ID != th.ID {
		t.Fatalf("thread created through A, read through B: %+v %v", got, err)
	}

	// A wake-up crosses processes: subscribe on B, append on A.
	stream, err := cb.StreamAll(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	posted, err := ca.Append(ctx, th.ID, agentbridge.EventInput{From: "user", Content: []byte(`"through A"`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	item, err := stream.Next()
	if err != nil || item.Event == nil || item.Event.ID != posted.ID {
		t.Fatalf("B's stream got %+v %v, want the event posted through A", item, err)
	}
	// So does a receipt: stored through A, announced on B's stream (and on
	// A's own, once).
	streamA, err := ca.Stream(ctx, th.ID, posted.Seq)
	if err != nil {
		t.Fatal(err)
	}
	rin := agentbridge.ReceiptInput{Thread: th.ID, Event: posted.ID, Participant: "codex", From: "bridge-coordinator", State: agentbridge.ReceiptQueued}
	if _, _, err := ca.PutReceipt(ctx, rin); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*client.Stream{"A": streamA, "B": stream} {
		item, err := st.Next()
		for err == nil && item.Presence != nil {
			item, err = st.Next()
		}
		if err != nil || item.Receipt == nil || item.Receipt.Event != posted.ID || item.Receipt.State != agentbridge.ReceiptQueued {
			t.Fatalf("%s's stream got %+v %v, want the receipt stored through A", name, item, err)
		}
	}
	// The same report again changes nothing and announces nothing; the
	// next change is the next thing each stream says.
	if _, changed, err := ca.PutReceipt(ctx, rin); err != nil || changed {
		t.Fatalf("repeated receipt: changed %v, %v", changed, err)
	}
	rin.State = agentbridge.ReceiptRunning
	if _, _, err := cb.PutReceipt(ctx, rin); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]*client.Stream{"A": streamA, "B": stream} {
		item, err := st.Next()
		for err == nil && item.Presence != nil {
			item, err = st.Next()
		}
		if err != nil || item.Receipt == nil || item.Receipt.State != agentbridge.ReceiptRunning {
			t.Fatalf("%s's stream got %+v %v, want the running receipt stored through B, once", name, item, err)
		}
	}
	_ = streamA.Close()
	_ = stream.Close()
	// A thread stream on B wakes for an event appended through A too (B's
	// thread hub reads the log on B's notify from the database).
	streamB, err := cb.Stream(ctx, th.ID, -1)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ca.Append(ctx, th.ID, agentbridge.EventInput{From: "user", Content: []byte(`"again through A"`)}, "")
	if err != nil {
		t.Fatal(err)
	}
	for {
		item, err := streamB.Next()
		if err != nil {
			t.Fatalf("B's thread stream: %v", err)
		}
		if item.Event != nil && item.Event.ID == again.ID {
			break
		}
	}
	_ = streamB.Close()

	const writersPerBridge, each = 4, 40
	start, _ := ca.Head(ctx)
	// Each writer also creates a thread of its own.
	total := 2 * writersPerBridge * (each + 1)
	type seen struct {
		events []agentbridge.Event
		err    error
	}
	follow := func(c *client.Client, out chan<- seen) {
		var got seen
		after := start
		for len(got.events) < total && ctx.Err() == nil {
			evs, next, err := c.Events(ctx, after, 7, 5*time.Second)
			if err != nil {
				got.err = err
				break
			}
			got.events = append(got.events, evs...)
			after = next
		}
		out <- got
	}
	results := make(chan seen, 2)
	go follow(ca, results)
	go follow(cb, results)

	var wg sync.WaitGroup
	errs := make(chan error, total)
	for w := range 2 * writersPerBridge {
		c := ca
		if w%2 == 1 {
			c = cb
		}
		wg.Go(func() {
			for i := range each {
				thread := th.ID
				if i%3 == 0 {
					thread = fmt.Sprintf("w%d", w)
					if i == 0 {
						if _, err := c.CreateThread(ctx, agentbridge.CreateThreadRequest{ID: thread}); err != nil {
							errs <- err
							return
						}
					}
				}
				if _, err := c.Append(ctx, thread, agentbridge.EventInput{From: fmt.Sprintf("agent%d", w), Content: []byte(fmt.Sprintf(`"m%d"`, i))}, ""); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for range 2 {
		got := <-results
		if got.err != nil {
			t.Fatal(got.err)
		}
		if len(got.events) != total {
			t.Fatalf("follower saw %d events, want %d", len(got.events), total)
		}
		for i, ev := range got.events {
			if want := start + int64(i) + 1; ev.GSeq != want {
				t.Fatalf("follower saw gseq %d at position %d, want %d: it skipped or repeated an event", ev.GSeq, i, want)
			}
		}
	}
	for _, c := range []*client.Client{ca, cb} {
		evs, err := c.ThreadEvents(ctx, agentbridge.ThreadEventsQuery{Thread: th.ID, After: -1})
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) || (i > 0 && ev.TS <= evs[i-1].TS) {
				t.Fatalf("thread seen through %s: event %d has seq %d ts %s: seq must be gapless, ts increasing", c.URL(), i, ev.Seq, ev.TS)
			}
		}
	}
}

// TestCoordinatorLeaseTakeover runs two real coordinators on one
// PostgreSQL ledger: one works, the other stands by; kill -9 of the worker
// mid-invocation hands the lease over within 10 s, and every (trigger,
// participant) pair still gets exactly one reply.
func TestCoordinatorLeaseTakeover(t *testing.T) {
	stack.Heavy(t)
	bin, fake := buildCoordBinaries(t)
	e := newCoordEnv(t, fake)
	e.statePath = pg.Database(t)
	leader := e.startCoordProc(bin)

	// The standby shares config and status address: it binds the address
	// only once it holds the lease, so "one address" follows the leader.
	standby := e.startStandby(bin, "second coordinator")

	th := e.threadWithAlice()
	var triggers []agentbridge.Event
	for i := range 3 {
		triggers = append(triggers, e.say(th, "alice", fmt.Sprintf("fake:sleep=2s %d", i)))
	}
	testutil.WaitFor(t, 30*time.Second, "the first adapter run", func() bool { return e.runs(triggers[0].ID) == 1 })
	if err := leader.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	leader.Wait(t)
	killed := time.Now()
	testutil.WaitFor(t, 10*time.Second, "the standby to take over and follow the log", func() bool { return stack.Following(e.statusURL) })
	t.Logf("takeover after %v", time.Since(killed).Round(time.Millisecond))
	for _, trig := range triggers {
		testutil.WaitFor(t, 60*time.Second, "a reply to "+trig.ID, func() bool { return len(e.replies(th, trig.ID)) >= 1 })
	}
	// Let a late duplicate show up if one were coming.
	testutil.WaitFor(t, 30*time.Second, "every record to be succeeded", func() bool {
		for _, trig := range triggers {
			if e.invocationStatus(trig.ID) != "succeeded" {
				return false
			}
		}
		return true
	})
	for _, trig := range triggers {
		if got := e.replies(th, trig.ID); len(got) != 1 || got[0].From != "alice" {
			t.Errorf("trigger %s: replies %+v, want exactly one from alice", trig.ID, got)
		}
	}
	standby.Terminate(t)
}

// TestPostgresLogEpoch runs real `serve` processes on a real PostgreSQL
// database: GET /ping carries the log's epoch, begun on the first start;
// a restart keeps it; a restore from an older dump (pg_dump, then
// pg_restore --clean with the bridge stopped) begins a new one whose base
// is the dump's last gseq, so a coordinator that read past it knows to go
// back there (docs/delivery.md, "After a restore").
func TestPostgresLogEpoch(t *testing.T) {
	stack.Heavy(t)
	url := pg.Database(t)
	binDir, err := pgtest.BinDir()
	if err != nil {
		t.Skip(err)
	}
	bin := buildServeBinary(t)
	ping := func(p *stack.Bridge) agentbridge.LogEpoch {
		t.Helper()
		info, err := client.New(p.URL).Ping(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if info.Epoch == nil || info.Epoch.ID == 0 {
			t.Fatalf("GET /ping carries no epoch: %+v", info)
		}
		return *info.Epoch
	}
	stop := func(p *stack.Bridge) {
		t.Helper()
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		if err := <-p.Done; err != nil {
			t.Fatalf("serve exited with %v", err)
		}
	}
	post := func(p *stack.Bridge, n int) int64 {
		t.Helper()
		cl := client.New(p.URL, client.WithToken(p.Token))
		var last agentbridge.Event
		for i := range n {
			if last, err = cl.Append(t.Context(), "epoch", agentbridge.EventInput{From: "user", Content: json.RawMessage(fmt.Sprintf(`"m%d"`, i))}, ""); err != nil {
				t.Fatal(err)
			}
		}
		return last.GSeq
	}

	p := startServe(t, bin, url)
	first := ping(p)
	if first.Base != 0 {
		t.Errorf("a new database's epoch has base %d, want 0", first.Base)
	}
	if _, err := client.New(p.URL, client.WithToken(p.Token)).CreateThread(t.Context(), agentbridge.CreateThreadRequest{ID: "epoch"}); err != nil {
		t.Fatal(err)
	}
	dumped := post(p, 3)
	dump := filepath.Join(t.TempDir(), "bridge.dump")
	if out, err := exec.Command(filepath.Join(binDir, "pg_dump"), "-Fc", "-f", dump, "-d", url).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	post(p, 4)
	stop(p)

	p = startServe(t, bin, url)
	if again := ping(p); again != first {
		t.Errorf("after a restart the epoch is %+v, want %+v", again, first)
	}
	stop(p)

	if out, err := exec.Command(filepath.Join(binDir, "pg_restore"), "--clean", "--if-exists", "-d", url, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	p = startServe(t, bin, url)
	restored := ping(p)
	if restored.ID == first.ID || restored.Base != dumped {
		t.Errorf("after a restore of the dump taken at gseq %d the epoch is %+v (before: %+v), want a new id based at %d", dumped, restored, first, dumped)
	}
	if next := post(p, 1); next != dumped+1 {
		t.Errorf("the first event after the restore has gseq %d, want %d", next, dumped+1)
	}
	stop(p)
	p = startServe(t, bin, url)
	if again := ping(p); again != restored {
		t.Errorf("after a restart the restored epoch is %+v, want %+v", again, restored)
	}
}

// TestPairAcrossBridges runs two real `serve` processes on one PostgreSQL
// database: a pairing link made through one (`agent-bridge pair`) is
// redeemed through the other, whose login cookie then works on both, and
// is used up for both.
func TestPairAcrossBridges(t *testing.T) {
	stack.Heavy(t)
	url := pg.Database(t)
	bin := buildServeBinary(t)
	a, b := startServe(t, bin, url), startServe(t, bin, url)
	pair := exec.Command(bin, "pair", "--name", "phone")
	pair.Env = append(os.Environ(), "BRIDGE_URL="+a.URL, "BRIDGE_TOKEN="+a.Token)
	out, err := pair.CombinedOutput()
	if err != nil {
		t.Fatalf("agent-bridge pair: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`#pair=(\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("agent-bridge pair printed no link:\n%s", out)
	}
	redeem := func(p *stack.Bridge) *http.Response {
		t.Helper()
		resp, err := http.Post(p.URL+"/auth/pair/redeem", "application/json", strings.NewReader(`{"code":"`+string(m[1])+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := redeem(b)
	if resp.StatusCode != http.StatusOK || len(resp.Cookies()) != 1 {
		t.Fatalf("the link made through one bridge, redeemed through the other: %s, cookies %v", resp.Status, resp.Cookies())
	}
	cookie := resp.Cookies()[0]
	for _, p := range []*stack.Bridge{a, b} {
		req, _ := http.NewRequest("GET", p.URL+"/threads", nil)
		req.AddCookie(cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the paired device's cookie on %s: %s", p.URL, resp.Status)
		}
	}
	for _, p := range []*stack.Bridge{a, b} {
		if resp := redeem(p); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the used link redeemed again through %s: %s, want 401", p.URL, resp.Status)
		}
	}
	devices, err := client.New(b.URL, client.WithToken(b.Token)).Devices(t.Context())
	if err != nil || len(devices) != 1 || devices[0].Name != "phone" {
		t.Errorf("devices through the other bridge: %+v, %v; want the phone", devices, err)
	}
}
