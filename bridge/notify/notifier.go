package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/SherClockHolmes/webpush-go"

	agentbridge "github.com/agent-bridge/agent-bridge"
)

// Defaults of Options.
const (
	// DefaultVisibleTTL is how long a page's "visible on this thread" lasts
	// without a new heartbeat; the UI repeats it every 20 s.
	DefaultVisibleTTL = 45 * time.Second
	// DefaultSubject is the VAPID subject (RFC 8292 "sub"): how a push
	// service reaches the sender's operator.
	DefaultSubject = "https://github.com/agent-bridge/agent-bridge"
	// queueSize bounds the events waiting for the notifier; one that finds
	// it full is logged and not notified rather than slowing appends.
	queueSize = 1024
	// sendTimeout bounds one delivery (contract 8.3: 10 s).
	sendTimeout = 10 * time.Second
	// laneSize bounds the notes waiting for one destination; past it a
	// note for that destination is logged and dropped, so a dead endpoint
	// costs memory for its own notes only.
	laneSize = 256
)

// Options configures a Notifier.
type Options struct {
	// Store keeps the VAPID keys and the subscriptions; nil sends no Web
	// Push.
	Store agentbridge.PushStore
	// Humans are the participant ids that are people.
	Humans agentbridge.Humans
	// Subject is the VAPID subject, an https or mailto URL
	// (DefaultSubject when empty).
	Subject string
	// Ntfy, when its URL is set, also sends the notes of its categories
	// to an ntfy topic.
	Ntfy Ntfy
	// ThreadName returns a thread's name ("" when unknown), which ntfy's
	// text names the thread by; nil names it by its id.
	ThreadName func(ctx context.Context, thread string) string
	// BaseURL returns the bridge's public base URL (scheme://host[:port]),
	// which ntfy's click link starts with.
	BaseURL func() string
	// Client sends the ntfy requests (a client with a 10 s timeout by
	// default). The ntfy URL is the operator's own choice, which may be a
	// server on their network; Web Push goes through a client of its own
	// (pushClient), whatever this is.
	Client *http.Client
	// AllowPrivateEndpoints lets Web Push reach an endpoint on a loopback,
	// private, link-local, shared or multicast address, and plain http on
	// a loopback host (the bridge config's notify.allow_private_endpoints;
	// tests' fake push service). Without it such an endpoint is refused
	// when subscribed (an address in the URL: CheckEndpoint) or when
	// dialed (a name that resolves to one).
	AllowPrivateEndpoints bool
	// MaxSubscriptions bounds the push subscriptions the bridge keeps in
	// all (agentbridge.DefaultMaxPushSubscriptions when 0; the bridge
	// config's notify.max_subscriptions); the bridge applies it when a
	// browser subscribes.
	MaxSubscriptions int
	// Observe, when set, is given each push's outcome (the bridge's
	// /metrics).
	Observe func(agentbridge.PushDelivery)
	Logger  *slog.Logger
	// Now is the clock (time.Now by default).
	Now func() time.Time
	// VisibleTTL is DefaultVisibleTTL when 0.
	VisibleTTL time.Duration
}

// Notifier sends the notes of the events it is handed. Create it with New,
// run it with Run; it is safe for concurrent use.
type Notifier struct {
	opts  Options
	log   *slog.Logger
	queue chan queued

	keysMu sync.Mutex
	keys   agentbridge.PushKeys

	visMu   sync.Mutex
	visible map[string]visibility // by endpoint

	// push sends Web Push (pushClient).
	push *http.Client

	// Each destination (a device's endpoint, or ntfy) has a lane: its
	// notes wait there and go out one at a time, in order, each within
	// sendTimeout, so a slow or dead destination delays only its own. The
	// lanes run side by side, as many as there are destinations with
	// notes waiting: at most the subscriptions the store keeps
	// (agentbridge.PushLimits) and ntfy.
	lanesMu sync.Mutex
	lanes   map[string]*lane
	senders sync.WaitGroup
}

// queued is an event handed to the notifier, and when: a push's latency
// is counted from then.
type queued struct {
	event agentbridge.Event
	at    time.Time
}

// lane is one destination's waiting deliveries and whether a goroutine is
// sending them.
type lane struct {
	pending []func(context.Context)
	running bool
}

// visibility is where a device's page last said it is visible, and until
// when that holds.
type visibility struct {
	thread string
	until  time.Time
}

// New builds a notifier.
func New(opts Options) *Notifier {
	if opts.Subject == "" {
		opts.Subject = DefaultSubject
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: sendTimeout}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.VisibleTTL <= 0 {
		opts.VisibleTTL = DefaultVisibleTTL
	}
	if opts.BaseURL == nil {
		opts.BaseURL = func() string { return "" }
	}
	return &Notifier{
		opts:    opts,
		log:     opts.Logger.With("component", "notify"),
		queue:   make(chan queued, queueSize),
		visible: map[string]visibility{},
		push:    pushClient(opts.AllowPrivateEndpoints, sendTimeout),
		lanes:   map[string]*lane{},
	}
}

// Event hands the notifier a stored event. It never blocks and does
// nothing but a type check on the append's path: the notifier's goroutine
// decides the rest (Classify).
func (n *Notifier) Event(e agentbridge.Event) {
	if e.Type != agentbridge.TypeMessage || n.opts.Humans.Has(e.From) || (n.opts.Store == nil && n.opts.Ntfy.URL == "") {
		return
	}
	select {
	case n.queue <- queued{e, n.opts.Now()}:
	default:
		n.log.Warn("notification queue full; not notifying", "thread", e.Thread, "event", e.ID)
	}
}

// Run sends the notes of queued events until ctx ends, and returns once
// every delivery it started has returned.
func (n *Notifier) Run(ctx context.Context) {
	defer n.senders.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case q := <-n.queue:
			if note, ok := Classify(q.event, n.opts.Humans); ok {
				n.send(ctx, note, q.at)
			}
		}
	}
}

// Keys returns the VAPID key pair, generating and storing it on first use.
func (n *Notifier) Keys(ctx context.Context) (agentbridge.PushKeys, error) {
	if n.opts.Store == nil {
		return agentbridge.PushKeys{}, errors.New("this bridge keeps no push subscriptions")
	}
	n.keysMu.Lock()
	defer n.keysMu.Unlock()
	if n.keys.Public != "" {
		return n.keys, nil
	}
	priv, pub, err := webpush.GenerateVAPIDKeys()
	if err != nil {
		return agentbridge.PushKeys{}, fmt.Errorf("generate VAPID keys: %w", err)
	}
	k, err := n.opts.Store.PushKeys(ctx, agentbridge.PushKeys{Public: pub, Private: priv})
	if err != nil {
		return agentbridge.PushKeys{}, err
	}
	n.keys = k
	return k, nil
}

// SetVisible records that the page of the device subscribed at endpoint
// shows thread (or, visible false, shows nothing any more).
func (n *Notifier) SetVisible(endpoint, thread string, visible bool) {
	n.visMu.Lock()
	defer n.visMu.Unlock()
	now := n.opts.Now()
	for ep, v := range n.visible {
		if !now.Before(v.until) {
			delete(n.visible, ep)
		}
	}
	if !visible {
		delete(n.visible, endpoint)
		return
	}
	n.visible[endpoint] = visibility{thread: thread, until: now.Add(n.opts.VisibleTTL)}
}

// isVisible reports whether endpoint's page shows thread now.
func (n *Notifier) isVisible(endpoint, thread string) bool {
	n.visMu.Lock()
	defer n.visMu.Unlock()
	v, ok := n.visible[endpoint]
	return ok && v.thread == thread && n.opts.Now().Before(v.until)
}

// send hands note, handed to the notifier at at, to the lane of ntfy (when
// it wants the note's category) and of every device that wants it; it
// does not wait for them.
func (n *Notifier) send(ctx context.Context, note Note, at time.Time) {
	if n.opts.Ntfy.URL != "" && n.opts.Ntfy.wants(note.Category) {
		n.enqueue(ctx, "ntfy", func(ctx context.Context) {
			if err := n.sendNtfy(ctx, note); err != nil {
				n.log.Warn("ntfy", "event", note.Event, "err", err)
			}
		})
	}
	if n.opts.Store == nil {
		return
	}
	subs, err := n.opts.Store.PushSubscriptions(ctx)
	if err != nil {
		n.log.Error("list push subscriptions", "err", err)
	}
	subs = slices.DeleteFunc(subs, func(sub agentbridge.PushSubscription) bool {
		return !sub.Categories.Wants(note.Category, note.Thread) || n.isVisible(sub.Endpoint, note.Thread)
	})
	for _, sub := range byDeviceTurns(subs) {
		n.enqueue(ctx, "push "+sub.Endpoint, func(ctx context.Context) { n.pushTo(ctx, sub, note, at) })
	}
}

// byDeviceTurns orders subs as devices taking turns: every device's first
// subscription, then every device's second, and so on (a device is
// agentbridge.PushCapKey's). Each push costs its encryption and signature
// before its request leaves, so the order the lanes start in is the order
// their pushes go out when many start at once: a device with many
// browsers does not hold back another device's first one.
func byDeviceTurns(subs []agentbridge.PushSubscription) []agentbridge.PushSubscription {
	turn := make(map[string]int, len(subs))
	turns := make([]int, len(subs))
	for i, sub := range subs {
		k := agentbridge.PushCapKey(sub.TokenID, sub.Device)
		turns[i] = turn[k]
		turn[k]++
	}
	idx := make([]int, len(subs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return turns[a] - turns[b] })
	out := make([]agentbridge.PushSubscription, len(subs))
	for i, j := range idx {
		out[i] = subs[j]
	}
	return out
}

// enqueue adds deliver to dest's lane, starting the lane's sender when it
// has none.
func (n *Notifier) enqueue(ctx context.Context, dest string, deliver func(context.Context)) {
	n.lanesMu.Lock()
	defer n.lanesMu.Unlock()
	l := n.lanes[dest]
	if l == nil {
		l = &lane{}
		n.lanes[dest] = l
	}
	if len(l.pending) >= laneSize {
		n.log.Warn("a destination's notes are piling up; dropping one", "destination", dest, "waiting", len(l.pending))
		return
	}
	l.pending = append(l.pending, deliver)
	if !l.running {
		l.running = true
		n.senders.Go(func() { n.drain(ctx, dest, l) })
	}
}

// drain sends l's deliveries one after another until l is empty or ctx
// ends; then the lane is gone.
func (n *Notifier) drain(ctx context.Context, dest string, l *lane) {
	for {
		n.lanesMu.Lock()
		if len(l.pending) == 0 || ctx.Err() != nil {
			l.running = false
			delete(n.lanes, dest)
			n.lanesMu.Unlock()
			return
		}
		deliver := l.pending[0]
		l.pending[0] = nil
		l.pending = l.pending[1:]
		n.lanesMu.Unlock()
		deliver(ctx)
	}
}
