// thread.js: the open thread. Events are rendered incrementally (one node
// per event, appended or prepended, never a full re-render) and
// deduplicated by seq, so stream reconnects and history loads can overlap
// safely. The view sticks to the newest event the way a chat app does: it
// opens at the bottom once everything is drawn, stays there while events,
// receipts and headers grow the list, and, when the viewer has scrolled up,
// counts what arrived below in an "N new" pill instead of moving. It
// draws no event itself: each is drawn by whoever answers "draw" (events.js),
// and what becomes of it is announced on the bus (bus.js).

import * as api from "./api.js";
import { $ } from "./dom.js";
import { ui, tab, sender, inThreadWords, threadName, scrollToBottom, loadState } from "./shared.js";
import { publish, subscribe } from "./bus.js";

const PAGE = 100;
// BOTTOM_SLACK is how far from the bottom (px) still counts as at it.
const BOTTOM_SLACK = 40;

function newView(id) {
  return {
    id,
    ctrl: new AbortController(),
    nodes: new Map(), // seq -> element
    events: new Map(), // seq -> event
    byID: new Map(), // event id -> seq
    first: 0, // lowest loaded seq
    last: 0, // highest loaded seq (the live head as far as we know)
    cursor: null, // null = live, else the revision being viewed
    state: null, // state shown in the panel (live or as of cursor)
    liveState: null,
    presence: new Map(),
    receipts: new Map(), // event id -> Map participant -> receipt
    party: new Map(), // trigger id -> Map participant -> Set of rounds replied
    permissionAnswers: new Map(), // permission request id -> the answer that counts (cards.js)
    files: [], // files waiting to be sent: {name, att, error} (attachments.js)
    loadingOlder: false,
    stateReq: 0,
    replyTo: null,
    stick: true, // keep the newest event in view
    unseen: 0, // events that arrived below while scrolled up
    autoTop: -1, // the scrollTop the page itself set last
  };
}

export function navigate(id, replace) {
  const path = id ? "/ui/threads/" + encodeURIComponent(id) : "/ui/";
  if (location.pathname !== path) {
    if (replace) history.replaceState(null, "", path);
    else history.pushState(null, "", path);
  }
  // On a phone the thread list is a drawer over the thread: picking one
  // closes it.
  document.body.classList.remove("show-threads", "show-panel");
  openThread(id);
}

export function routeID() {
  const m = location.pathname.match(/^\/ui\/threads\/([^/]+)/);
  return m ? decodeURIComponent(m[1]) : null;
}

export async function openThread(id) {
  if (ui.view) ui.view.ctrl.abort();
  ui.view = null;
  $("event-list").replaceChildren();
  $("participant-list").replaceChildren();
  $("older").textContent = "Scroll up for older events";
  $("composer-error").hidden = true;
  showPill(null);
  if (!id) {
    $("thread-view").hidden = true;
    document.body.classList.remove("has-thread");
    $("empty").hidden = false;
    publish("opened", { v: null });
    return;
  }
  const v = (ui.view = newView(id));
  $("empty").hidden = true;
  $("thread-view").hidden = false;
  document.body.classList.add("has-thread");
  $("thread-title").textContent = threadName(id);
  $("scene-header").hidden = true;
  const base = `/threads/${encodeURIComponent(id)}/transcript?format=`;
  $("transcript-md").href = base + "md";
  $("transcript-md").download = `transcript-${id}.md`;
  $("transcript-json").href = base + "json";
  $("transcript-json").download = `transcript-${id}.json`;
  publish("opened", { v });
  try {
    const res = await api.get(`/threads/${encodeURIComponent(id)}/events?tail=${PAGE}`, { signal: v.ctrl.signal });
    if (v !== ui.view) return;
    const evs = res.events || [];
    for (const ev of evs) addEvent(v, ev);
    v.first = evs.length ? evs[0].seq : 1;
    if (!evs.length || v.first <= 1) markStart();
    scrollToBottom();
  } catch (err) {
    if (v !== ui.view) return;
    publish("thread-error", { message: inThreadWords(err.message, id) });
    return;
  }
  if (!document.hidden) publish("read", { id, seq: v.last });
  // The state names the participants, so receipts are drawn after it:
  // drawn before, a receipt would say "claude" and then "sage (claude)".
  await loadState(v);
  // Otherwise the stream's next connection loads presence and receipts.
  if (tab.up && v === ui.view) publish("ready", { v });
  tick(v);
  publish("changed", { v });
}

// addEvent renders ev once (dedupe by seq) in seq order. Live events (from
// the stream, not history pages) also refresh the state after a control
// and move the view or count as unseen. It reports whether the event was
// new.
function addEvent(v, ev, live) {
  if (typeof ev.seq !== "number" || v.nodes.has(ev.seq)) return false;
  const drawn = { v, ev, node: null };
  publish("draw", drawn);
  const node = drawn.node;
  v.events.set(ev.seq, ev);
  v.nodes.set(ev.seq, node);
  if (ev.id) v.byID.set(ev.id, ev.seq);
  const list = $("event-list");
  if (ev.seq > v.last) {
    list.append(node);
    v.last = ev.seq;
  } else {
    let before = null;
    for (const child of list.children) {
      if (Number(child.dataset.seq) > ev.seq) {
        before = child;
        break;
      }
    }
    list.insertBefore(node, before);
  }
  if (!v.first || ev.seq < v.first) v.first = ev.seq;
  publish("added", { v, ev, node });
  if (v.cursor !== null && ev.seq > v.cursor) node.classList.add("future");
  if ((ev.type === "thread.renamed" || ev.type === "thread.created") && ev.seq === v.last && typeof ev.content === "string") {
    $("thread-title").textContent = ev.content;
  }
  if (live) {
    // While party mode is on, a person's message may end it (an exit word).
    const partyOn = v.liveState && v.liveState.party && v.liveState.party.on;
    if (ev.type === "control" || ev.type === "scene.closed" || (ev.meta && ev.meta.scene) || (ev.type === "message" && partyOn)) loadState(v);
    if (ev.from === sender() && ev.type === "message") v.stick = true; // one's own post comes into view
    // A stuck view follows through the ResizeObserver (wireScrolling):
    // one layout and one scroll per frame, however many events a burst
    // brings, where a scroll here would force a layout per event.
    if (!v.stick && v.cursor === null) showPill(v, v.unseen + 1);
    if (!document.hidden) publish("read", { id: v.id, seq: v.last });
  }
  publish("changed", { v });
  return true;
}

async function loadOlder(v) {
  if (v.loadingOlder || v.first <= 1 || v !== ui.view) return;
  v.loadingOlder = true;
  const box = $("events");
  const oldHeight = box.scrollHeight;
  try {
    const res = await api.get(`/threads/${encodeURIComponent(v.id)}/events?until=${v.first - 1}&tail=${PAGE}`, { signal: v.ctrl.signal });
    if (v !== ui.view) return;
    const evs = res.events || [];
    for (let i = evs.length - 1; i >= 0; i--) addEvent(v, evs[i]);
    if (!evs.length || evs[0].seq <= 1) {
      v.first = 1;
      markStart();
    }
    box.scrollTop += box.scrollHeight - oldHeight;
    if (evs.length) publish("ready", { v, older: true });
  } catch (err) {
    if (v === ui.view) publish("thread-error", { message: err.message });
  } finally {
    v.loadingOlder = false;
  }
}

function markStart() {
  $("older").textContent = "Start of thread";
}

function atBottom() {
  const box = $("events");
  return box.scrollHeight - box.scrollTop - box.clientHeight < BOTTOM_SLACK;
}

// showPill shows "N new" (n > 0) or hides the pill (v null or n 0).
function showPill(v, n) {
  if (v) v.unseen = n || 0;
  const pill = $("new-pill");
  pill.hidden = !v || !v.unseen;
  if (v && v.unseen) pill.textContent = `${v.unseen} new ↓`;
}

// jumpToNewest is the pill's action: back to the bottom, and stay there.
export function jumpToNewest() {
  const v = ui.view;
  if (!v) return;
  v.stick = true;
  scrollToBottom();
  showPill(v, 0);
}

// wireScrolling follows the viewer's scrolling (stick or not, older pages
// at the top) and keeps a stuck view at the bottom whenever the list or
// its box changes size: receipts, the scene header, a longer composer,
// a rotated phone.
export function wireScrolling() {
  const box = $("events");
  box.addEventListener("scroll", () => {
    const v = ui.view;
    if (!v) return;
    const ours = Math.abs(box.scrollTop - v.autoTop) < 2;
    if (!ours || atBottom()) v.stick = atBottom();
    if (v.stick && v.unseen) showPill(v, 0);
    if (box.scrollTop < 60) loadOlder(v);
  });
  const keep = new ResizeObserver(() => {
    const v = ui.view;
    if (v && v.stick && v.cursor === null) scrollToBottom();
  });
  keep.observe(box);
  keep.observe($("event-list"));
  $("new-pill").addEventListener("click", jumpToNewest);
  // A quote and a receipt's reply are links within the thread: a tap
  // shows the event they name.
  $("event-list").addEventListener("click", (e) => {
    const link = e.target.closest(".reply-link[data-reply-to], .receipt-link[data-reply]");
    if (link && ui.view) showEvent(ui.view, link.dataset.replyTo || link.dataset.reply);
  });
}

async function showEvent(v, id) {
  for (let i = 0; i < 100 && !v.byID.has(id) && v.first > 1 && v === ui.view; i++) await loadOlder(v);
  const node = v.nodes.get(v.byID.get(id));
  if (!node) return;
  v.stick = false;
  node.scrollIntoView({ block: "center" });
  node.classList.remove("highlight");
  void node.offsetWidth;
  node.classList.add("highlight");
}

// tick keeps the "running 12 s" lines counting and turns presence stale
// when its TTL passes, while the view is open.
async function tick(v) {
  while (v === ui.view && !v.ctrl.signal.aborted) {
    await api.sleep(1000, v.ctrl.signal);
    if (v !== ui.view || document.hidden) continue;
    publish("tick", { v });
  }
}

// showCursor hides the events after the cursor and moves the view to it;
// the events before the first loaded one are loaded until it is.
function showCursor({ v, from, to }) {
  const lo = Math.min(from, to);
  const hi = Math.max(from, to);
  for (let s = lo + 1; s <= hi; s++) {
    const node = v.nodes.get(s);
    if (node) node.classList.toggle("future", to < s);
  }
  if (v.cursor !== null && v.cursor < v.first) {
    (async () => {
      for (let i = 0; i < 1000 && v === ui.view && v.cursor !== null && v.cursor < v.first && v.first > 1; i++) await loadOlder(v);
    })();
  }
  // After the revision bar is drawn for the new cursor (revision.js
  // follows "cursor" too), which moves the list.
  queueMicrotask(() => {
    const node = v.nodes.get(to);
    if (node && v.cursor !== null) node.scrollIntoView({ block: "nearest" });
    else if (v.cursor === null) {
      v.stick = true;
      scrollToBottom();
    }
  });
}

// showAsked opens a thread, unless it is open, and shows one of its events.
async function showAsked({ thread, event }) {
  if (!ui.view || ui.view.id !== thread) await openThread(thread);
  if (ui.view && ui.view.id === thread) await showEvent(ui.view, event);
}

subscribe("connected", ({ fresh }) => fresh && openThread(routeID()));
subscribe("message", ({ ev }) => ui.view && ev.thread === ui.view.id && addEvent(ui.view, ev, true));
subscribe("navigate", ({ id }) => navigate(id));
subscribe("show", showAsked);
subscribe("cursor", showCursor);
