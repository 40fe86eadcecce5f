// bus.js: the one channel through which the views talk. A view never calls
// another view: it publishes a named message saying what happened (or what
// the person asked for), and the views that care subscribe to it. So a
// view can be read on its own, and the messages below are the whole of
// what passes between views. Every name is declared here with what it
// carries; publishing or subscribing to any other name throws, so a typo
// fails at once. Subscribers run in the order they subscribed, before
// publish returns. TestModuleGraph (bridge/ui) reads the publish and
// subscribe calls and fails when two views talk to each other both ways.

// MESSAGES is every message: its name, who publishes it and what its
// detail holds.
export const MESSAGES = {
  // stream.js
  connected: "the stream is live again; {fresh}: it started at the head (the first connection, or after cursor_ahead)",
  message: "an event arrived on the stream, of any thread: {ev}",
  presence: "a presence change arrived on the stream: {p}",
  receipt: "a receipt arrived on the stream for the open thread: {v, r}",
  // thread.js
  opened: "a thread was opened, or none (v null): {v}",
  draw: "draw one event: {v, ev, node}; events.js sets node",
  added: "an event's node is in the list: {v, ev, node}",
  changed: "the open thread's events or head moved: {v}",
  ready: "the open thread is loaded, its state too, with the stream live: {v}; or an older page of its events was (older: true)",
  tick: "a second passed with the thread open and shown: {v}",
  read: "the viewer has seen thread id up to seq: {id, seq}",
  "thread-error": "the thread's events could not be loaded: {message}",
  // events.js
  parts: "the parts of an event's card: {v, ev, node, ask, files, change, card, form}; each part's module sets its own",
  reply: "the viewer taps Reply on a message: {ev}",
  answer: "the viewer taps Answer on a question: {ev}",
  // cards.js, changes.js
  control: "post a control event as the viewer: {content}",
  // panel.js
  "control-ignored": "a control posted from the page changed nothing, or was refused: {content, reason}",
  "panel-drawn": "the thread panel was drawn from the state (its participants listed): {v}",
  // presence.js
  "presence-drawn": "the participants' presence was drawn: {v}",
  // composer.js
  sent: "the composer's message was posted: {v}",
  // notify.js
  navigate: "open thread id, as a link to it does: {id}",
  // search.js, phone.js
  show: "show event `event` of thread `thread`, opening the thread first if need be: {thread, event}",
  // shared.js (the store)
  state: "the open thread's state was loaded: {v, live}, or failed: {v, error}",
  cursor: "the revision cursor moved: {v, from, to} (the versions shown before and now)",
};

const channel = new EventTarget();

function known(name) {
  if (!Object.prototype.hasOwnProperty.call(MESSAGES, name)) throw new Error(`bus: no message named ${name}`);
}

// publish hands detail to every subscriber of name, in order; a subscriber
// that throws is reported and the others still run.
export function publish(name, detail) {
  known(name);
  channel.dispatchEvent(new CustomEvent(name, { detail }));
}

// subscribe calls fn(detail) for each message named name.
export function subscribe(name, fn) {
  known(name);
  channel.addEventListener(name, (e) => fn(e.detail));
}
