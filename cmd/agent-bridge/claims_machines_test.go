package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	agentbridge "github.com/agent-bridge/agent-bridge"
	"github.com/agent-bridge/agent-bridge/client"
	"github.com/agent-bridge/agent-bridge/coordinator/status"
	"github.com/agent-bridge/agent-bridge/internal/testkit/stack"
	"github.com/agent-bridge/agent-bridge/internal/testkit/testutil"
)

// claimsThread is a thread with alice invited (client fake-alice), and
// the helpers the claims tests share.
type claimsThread struct {
	t   *testing.T
	cl  *client.Client
	id  string
	ctx context.Context
}

func newClaimsThread(t *testing.T, cl *client.Client, invite ...string) *claimsThread {
	t.Helper()
	ctx := context.Background()
	th, err := cl.CreateThread(ctx, agentbridge.CreateThreadRequest{Name: "claims"})
	if err != nil {
		t.Fatal(err)
	}
	c := &claimsThread{t: t, cl: cl, id: th.ID, ctx: ctx}
	for _, p := range invite {
		b, _ := json.Marshal(map[string]any{"invite": map[string]any{"participant_id": p, "profile": map[string]any{"client": "fake-" + p, "model": "m"}}})
		if _, err := cl.Append(ctx, th.ID, agentbridge.EventInput{Type: "control", From: "user", Content: b}, ""); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// say posts a message from the user to to.
func (c *claimsThread) say(to, text string) agentbridge.Event {
	c.t.Helper()
	b, _ := json.Marshal(text)
	ev, err := c.cl.Append(c.ctx, c.id, agentbridge.EventInput{From: "user", To: to, Content: b}, "")
	if err != nil {
		c.t.Fatal(err)
	}
	return ev
}

// replies counts the replies from participant per trigger.
func (c *claimsThread) replies(participant string) map[string]int {
	out := map[string]int{}
	var after int64
	for {
		evs, err := c.cl.ThreadEvents(c.ctx, agentbridge.ThreadEventsQuery{Thread: c.id, After: after, Limit: agentbridge.MaxEventsLimit})
		if err != nil || len(evs) == 0 {
			return out
		}
		for _, ev := range evs {
			if ev.From == participant && ev.Meta.ReplyTo != "" {
				out[ev.Meta.ReplyTo]++
			}
		}
		after = evs[len(evs)-1].Seq
	}
}

// tagged counts the thread's events with tag.
func (c *claimsThread) tagged(tag string) int {
	evs, err := c.cl.ThreadEvents(c.ctx, agentbridge.ThreadEventsQuery{Thread: c.id, After: -1, Limit: agentbridge.MaxEventsLimit})
	if err != nil {
		return -1
	}
	n := 0
	for _, ev := range evs {
		if ev.Meta.HasTag(tag) {
			n++
		}
	}
	return n
}

// aliceOnTwoMachines starts coordinators laptop and server, both serving
// alice, makes a thread with her invited and says n triggers to her, each
// answered before it returns (the wait follows the replies as they come).
// Their start limit is past the default 30 a minute per thread, which
// would spread the triggers over minutes.
func aliceOnTwoMachines(t *testing.T, s *stack.Stack, n int) (a, b *stack.Machine, th *claimsThread, triggers []agentbridge.Event) {
	t.Helper()
	ms := s.Machines(map[string]any{"max_invocations_per_minute": 1000}, "laptop=alice", "server=alice")
	th = newClaimsThread(t, s.Person, "alice")
	triggers = make([]agentbridge.Event, n)
	for i := range triggers {
		triggers[i] = th.say("alice", "hi alice "+string(rune('a'+i%26)))
	}
	testutil.WaitProgress(t, time.Minute, "a reply to each of the triggers", func() (int, bool) {
		got := len(th.replies("alice"))
		return got, got == n
	})
	return ms[0], ms[1], th, triggers
}

// runHolder waits until a or b starts the run of event for participant
// and returns that machine first, the other second.
func runHolder(t *testing.T, a, b *stack.Machine, event, participant string) (holder, other *stack.Machine) {
	t.Helper()
	testutil.WaitFor(t, 30*time.Second, "a coordinator to start the run of "+event, func() bool {
		switch {
		case a.Started(event, participant):
			holder, other = a, b
		case b.Started(event, participant):
			holder, other = b, a
		}
		return holder != nil
	})
	return holder, other
}

// TestClaimsOneAgentTwoMachines: two coordinators, each its own process,
// HOME, state file, status port and token, both serving alice. A hundred
// triggers get a hundred replies and a hundred runs in total: each run is
// claimed at the bridge, and the coordinator that is not granted a claim
// ends its record without running (contract 7.1).
func TestClaimsOneAgentTwoMachines(t *testing.T) {
	stack.Heavy(t)
	s := stack.New(t, bins, "")
	const n = 100
	a, b, th, triggers := aliceOnTwoMachines(t, s, n)
	// Every record is final once its reply is in; a late second run would
	// show in runs.log, which both are read after the replies.
	replies := th.replies("alice")
	ra, rb := a.RunsOf(), b.RunsOf()
	total := 0
	for _, e := range triggers {
		if replies[e.ID] != 1 {
			t.Errorf("trigger %s: %d replies, want 1", e.ID, replies[e.ID])
		}
		if runs := ra[e.ID] + rb[e.ID]; runs != 1 {
			t.Errorf("trigger %s: %d runs (laptop %d, server %d), want 1", e.ID, runs, ra[e.ID], rb[e.ID])
		}
		total += ra[e.ID] + rb[e.ID]
	}
	if total != n {
		t.Errorf("%d runs in total, want %d", total, n)
	}
	// Each coordinator's records of the triggers the other ran ended
	// elsewhere, naming the holder (what `runs` and `why` show).
	for _, m := range []*stack.Machine{a, b} {
		req, _ := http.NewRequest(http.MethodGet, m.StatusURL+"/invocations?status=elsewhere&limit=5", nil)
		req.Header.Set("Authorization", "Bearer "+s.Bridge.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var got status.InvocationsResponse
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || len(got.Invocations) == 0 {
			t.Errorf("%s: elsewhere records = %+v, %v; want some", m.ID, got, err)
			continue
		}
		if e := got.Invocations[0].Error; !strings.Contains(e, "run elsewhere") {
			t.Errorf("%s: an elsewhere record's error = %q, want the holder named", m.ID, e)
		}
	}
	t.Logf("runs: laptop %d, server %d", len(ra), len(rb))
}

// TestClaimsKillMidRun: the coordinator holding a run is killed (-9)
// while its adapter waits; its claim lapses with its heartbeat and the
// other coordinator serving the agent takes the run over and answers it
// once. Only the holder's adapter waits (fake:wait, released in the other
// machine's directory only), so the time from the kill to the reply,
// logged for docs/performance.md, is the take-over itself.
func TestClaimsKillMidRun(t *testing.T) {
	stack.Heavy(t)
	s := stack.New(t, bins, "")
	cl := s.Person
	ms := s.Machines(nil, "laptop=alice", "server=alice")
	a, b := ms[0], ms[1]
	th := newClaimsThread(t, cl, "alice")
	e := th.say("alice", "fake:wait a long one")
	holder, other := runHolder(t, a, b, e.ID, "alice")
	// The other machine's run of it answers at once.
	release := func(m *stack.Machine) {
		if err := os.WriteFile(filepath.Join(m.FakeDir, e.ID+".release"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	release(other)
	killed := time.Now()
	holder.Kill()
	// The killed holder's orphaned adapter ends once released; its reply
	// has no coordinator left to post it.
	defer release(holder)
	testutil.WaitFor(t, 60*time.Second, "the other coordinator's reply", func() bool {
		return th.replies("alice")[e.ID] > 0
	})
	t.Logf("kill -9 of %s mid-run: %s answered %s after the kill (claim_ttl_s 3, its adapter answering at once)",
		holder.ID, other.ID, time.Since(killed).Round(10*time.Millisecond))
	if got := th.replies("alice")[e.ID]; got != 1 {
		t.Errorf("%d replies, want 1", got)
	}
	if got := other.RunsOf()[e.ID]; got != 1 {
		t.Errorf("the other coordinator ran it %d times, want 1", got)
	}
	claims, err := cl.Claims(th.ctx, th.id)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 || claims[0].Coordinator != other.ID || claims[0].Fence != 2 {
		t.Errorf("claims = %+v, want one held by %s at fence 2", claims, other.ID)
	}
}

// TestClaimsStoppedCoordinator: a trigger for alice while her only
// coordinator is stopped (another coordinator, serving bob, running)
// waits at the bridge — its receipt says so — and is answered once when
// her coordinator starts again.
func TestClaimsStoppedCoordinator(t *testing.T) {
	stack.Heavy(t)
	s := stack.New(t, bins, "")
	cl := s.Person
	ms := s.Machines(nil, "laptop=alice", "server=bob")
	laptop := ms[0]
	th := newClaimsThread(t, cl, "alice", "bob", "carol")
	receipts := stack.FollowReceipts(t, cl, th.id, 0)
	// carol, whom no coordinator ever served, is said so once at her
	// invite, though both coordinators saw it.
	testutil.WaitFor(t, 30*time.Second, "the unserved notice for carol", func() bool { return th.tagged("unserved") == 1 })
	first := th.say("alice", "hello")
	testutil.WaitFor(t, 30*time.Second, "alice's first reply", func() bool { return th.replies("alice")[first.ID] == 1 })

	laptop.Stop()
	e := th.say("alice", "are you there?")
	defer func() {
		if t.Failed() {
			rest, err := cl.Receipts(th.ctx, agentbridge.ReceiptsQuery{Thread: th.id, Event: e.ID})
			t.Logf("receipts of %s: stream %+v, GET %+v %v", e.ID, receipts.Of(e.ID, "alice"), rest, err)
		}
	}()
	// The bridge writes the waiting receipt with the claim; it is read
	// back from GET receipts.
	testutil.WaitFor(t, 30*time.Second, "the waiting receipt", func() bool {
		rs, err := cl.Receipts(th.ctx, agentbridge.ReceiptsQuery{Thread: th.id, Event: e.ID})
		return err == nil && len(rs) == 1 && rs[0].Participant == "alice" && rs[0].State == agentbridge.ReceiptQueued &&
			rs[0].Reason == "waiting for a coordinator serving alice"
	})
	for _, r := range receipts.Of(e.ID, "alice") {
		if r.State == agentbridge.ReceiptSkipped {
			t.Errorf("a skipped receipt for alice while she waits: %+v", r)
		}
	}
	laptop.Start()
	testutil.WaitFor(t, 30*time.Second, "alice's answer once her coordinator is back", func() bool {
		return th.replies("alice")[e.ID] > 0
	})
	testutil.WaitFor(t, 30*time.Second, "alice's receipt to say succeeded", func() bool {
		rs := receipts.Of(e.ID, "alice")
		return len(rs) > 0 && rs[len(rs)-1].State == agentbridge.ReceiptSucceeded
	})
	if got := th.replies("alice")[e.ID]; got != 1 {
		t.Errorf("%d replies to the waiting trigger, want 1", got)
	}
	if got := laptop.RunsOf()[e.ID]; got != 1 {
		t.Errorf("%d runs of the waiting trigger, want 1", got)
	}
	if got := th.tagged("unserved"); got != 1 {
		t.Errorf("%d unserved notices, want 1", got)
	}
}

// stallProxy is a TCP proxy on 127.0.0.1 in front of the bridge. While
// stalled it holds every byte in both directions (and new connections),
// as a network partition does; released, it lets them through late.
type stallProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	gate   chan struct{} // closed while not stalled
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target, gate: make(chan struct{})}
	close(p.gate)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		p.release()
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// url is the proxy's address as a bridge URL.
func (p *stallProxy) url() string { return "http://" + p.ln.Addr().String() }

// stall holds all traffic from now on.
func (p *stallProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// release lets the held traffic through.
func (p *stallProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// wait blocks while the proxy is stalled.
func (p *stallProxy) wait() {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	<-g
}

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(out, in)
		go p.pipe(in, out)
	}
}

// pipe copies from src to dst, each chunk held while the proxy stalls.
func (p *stallProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer dst.Close()
	r := bufio.NewReader(src)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// TestClaimsPartition: the coordinator holding a run loses the bridge (a
// proxy between them stalls every connection, its heartbeat too) past
// claim_ttl_s; the other coordinator takes the run over and answers it.
// When the stalled traffic goes through, the late reply is refused with
// 409 fenced, and the thread holds one reply.
func TestClaimsPartition(t *testing.T) {
	stack.Heavy(t)
	s := stack.New(t, bins, "")
	cl := s.Person
	proxy := newStallProxy(t, strings.TrimPrefix(s.URL(), "http://"))
	a := stack.NewMachine(t, cl, proxy.url(), s.Bin, s.Fake, "laptop", "alice")
	b := s.Machine("server", "alice")
	a.Start()
	th := newClaimsThread(t, cl, "alice")
	// Only the laptop runs when the trigger comes: it holds the claim.
	e := th.say("alice", "fake:sleep=4s across a partition")
	testutil.WaitFor(t, 30*time.Second, "the laptop to start the run", func() bool { return a.Started(e.ID, "alice") })
	// The server starts meanwhile: its own record of the trigger ends
	// elsewhere, the laptop holding the claim.
	b.Start()
	proxy.stall()
	testutil.WaitFor(t, 60*time.Second, "the server's reply once the laptop's claim lapsed", func() bool {
		return th.replies("alice")[e.ID] > 0
	})
	proxy.release()
	testutil.WaitFor(t, 60*time.Second, "the laptop's late reply to be fenced", func() bool {
		return strings.Contains(a.Proc.Stderr.String(), "another coordinator took this run over")
	})
	if got := th.replies("alice")[e.ID]; got != 1 {
		t.Errorf("%d replies, want 1", got)
	}
	if got := b.RunsOf()[e.ID]; got != 1 {
		t.Errorf("the server ran it %d times, want 1", got)
	}
}
