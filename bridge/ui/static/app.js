// app.js: the agent-bridge web UI. One page; the history API routes
// /ui/threads/{id}. Events are rendered incrementally (one node per event,
// appended or prepended, never a full re-render) and deduplicated by seq, so
// stream reconnects and history loads can overlap safely. Untrusted content
// only ever reaches the page through textContent (see markdown.js).

import * as api from "./api.js";
import { renderMarkdown } from "./markdown.js";
import { drawReceipts } from "./receipts.js";
import { $, el } from "./dom.js";
import { wireSuggestions } from "./suggestions.js";

const PAGE = 100;
const THREADS_PAGE = 500;
const SENDER_KEY = "agent-bridge-sender";

// ---------------------------------------------------------------- settings

function sender() {
  return $("sender").value.trim() || "user";
}

// --------------------------------------------------------------- threads

let threads = [];

async function loadThreads() {
  try {
    // Page through the list (after = the last id of the previous page),
    // bounded so a huge bridge cannot keep the page busy forever.
    const all = [];
    let after = "";
    for (let i = 0; i < 20; i++) {
      const res = await api.get(`/threads?limit=${THREADS_PAGE}` + (after ? `&after=${encodeURIComponent(after)}` : ""));
      const page = res.threads || [];
      all.push(...page);
      if (page.length < THREADS_PAGE) break;
      after = page[page.length - 1].id;
    }
    threads = all;
    threads.sort((a, b) => String(b.updated_at || "").localeCompare(String(a.updated_at || "")));
    renderThreads();
  } catch (err) {
    setConn("error: " + err.message);
  }
}

let threadsShown = "";
let threadsFrame = null;

// noteThread keeps the thread list current from one streamed event: a new
// thread, a new name, a new most recent activity.
function noteThread(ev) {
  if (typeof ev.thread !== "string" || !ev.thread) return;
  let t = threads.find((x) => x.id === ev.thread);
  if (!t) threads.push((t = { id: ev.thread, name: ev.thread, updated_at: "" }));
  if ((ev.type === "thread.created" || ev.type === "thread.renamed") && typeof ev.content === "string") t.name = ev.content;
  if (typeof ev.ts === "string" && ev.ts > String(t.updated_at || "")) t.updated_at = ev.ts;
  threads.sort((a, b) => String(b.updated_at || "").localeCompare(String(a.updated_at || "")));
  // One redraw per frame, however many events a burst brings.
  if (threadsFrame === null) {
    threadsFrame = requestAnimationFrame(() => {
      threadsFrame = null;
      renderThreads();
    });
  }
}

// renderThreads redraws the list only when what it shows changed, so an
// update does not swap links out from under a click.
function renderThreads() {
  const q = $("thread-search").value.trim().toLowerCase();
  const sig = JSON.stringify([q, view && view.id, threads.map((t) => [t.id, t.name, t.updated_at])]);
  if (sig === threadsShown) return;
  threadsShown = sig;
  const items = [];
  for (const t of threads) {
    const name = t.name || t.id;
    if (q && !name.toLowerCase().includes(q)) continue;
    const li = el("li", "thread-item" + (view && view.id === t.id ? " active" : ""));
    li.dataset.id = t.id;
    const a = el("a", "thread-link", name);
    a.href = "/ui/threads/" + encodeURIComponent(t.id);
    a.addEventListener("click", (e) => {
      if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
      e.preventDefault();
      navigate(t.id);
    });
    li.append(a, el("span", "thread-meta", t.updated_at ? shortTime(t.updated_at) : ""));
    items.push(li);
  }
  $("thread-list").replaceChildren(...items);
}

function threadName(id) {
  const t = threads.find((x) => x.id === id);
  return t ? t.name : id;
}

async function createThread(name) {
  const body = { from: sender() };
  if (name) body.name = name;
  const res = await api.post("/threads", body);
  // The stream brings the thread.created event too; listing it now means
  // the link is there before the page moves to it.
  noteThread({ thread: res.id, type: "thread.created", content: res.name, ts: res.updated_at });
  renderThreads();
  navigate(res.id);
}

// ------------------------------------------------------------ thread view

// view is the open thread: its loaded events, cursors and timers. It is
// replaced (and its controller aborted) when another thread opens.
let view = null;

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
    loadingOlder: false,
    stateReq: 0,
    replyTo: null,
    stick: null, // pending animation frame that keeps the view at the bottom
  };
}

function navigate(id, replace) {
  const path = id ? "/ui/threads/" + encodeURIComponent(id) : "/ui/";
  if (location.pathname !== path) {
    if (replace) history.replaceState(null, "", path);
    else history.pushState(null, "", path);
  }
  openThread(id);
}

function routeID() {
  const m = location.pathname.match(/^\/ui\/threads\/([^/]+)/);
  return m ? decodeURIComponent(m[1]) : null;
}

async function openThread(id) {
  if (view) view.ctrl.abort();
  view = null;
  $("event-list").replaceChildren();
  $("participant-list").replaceChildren();
  $("older").textContent = "Scroll up for older events";
  $("composer-error").hidden = true;
  setReply(null);
  if (!id) {
    $("thread-view").hidden = true;
    $("panel").hidden = true;
    $("empty").hidden = false;
    renderThreads();
    return;
  }
  const v = (view = newView(id));
  $("empty").hidden = true;
  $("thread-view").hidden = false;
  $("panel").hidden = false;
  $("thread-title").textContent = threadName(id);
  $("scene-header").hidden = true;
  const base = `/threads/${encodeURIComponent(id)}/transcript?format=`;
  $("transcript-md").href = base + "md";
  $("transcript-md").download = `transcript-${id}.md`;
  $("transcript-json").href = base + "json";
  $("transcript-json").download = `transcript-${id}.json`;
  renderThreads();
  renderRevision();
  try {
    const res = await api.get(`/threads/${encodeURIComponent(id)}/events?tail=${PAGE}`, { signal: v.ctrl.signal });
    if (v !== view) return;
    const evs = res.events || [];
    for (const ev of evs) addEvent(v, ev);
    v.first = evs.length ? evs[0].seq : 1;
    if (!evs.length || v.first <= 1) markStart();
    scrollToBottom();
  } catch (err) {
    if (v !== view) return;
    showComposerError(err.message);
    return;
  }
  refreshState(v);
  if (tab.up) {
    // Otherwise the stream's next connection loads them.
    loadPresence(v);
    loadReceipts(v);
  }
  tick(v);
  renderRevision();
}

// The tab follows one stream, the global one (GET /events/stream): every
// thread's events (which keep the thread list current and feed the open
// thread), presence changes and receipts. One, and none while the tab is
// hidden: browsers allow only six HTTP/1.1 connections per host across all
// tabs, and a held stream occupies one. Presence and receipts are not
// replayed, so every connection reloads those of the open thread; a
// connection that starts at the head (the first, or after cursor_ahead)
// reloads everything, after the stream's start is fixed, so nothing falls
// between the load and the stream.
const tab = {
  ctrl: null, // aborts the stream; null while not streaming
  gseq: null, // the last gseq received; null = start at the head
  from: null, // the cursor the current connection started from
  up: false, // the stream is connected
};

function startStream() {
  if (tab.ctrl) return;
  tab.ctrl = new AbortController();
  followStream(tab.ctrl.signal);
}

function stopStream() {
  if (!tab.ctrl) return;
  tab.ctrl.abort();
  tab.ctrl = null;
  tab.up = false;
  setConn("paused while hidden");
}

function followStream(signal) {
  api.stream("/events/stream", {
    signal,
    cursor: () => (tab.from = tab.gseq),
    onStatus: (status) => {
      setConn(status);
      tab.up = status === "live";
      if (!tab.up) return;
      if (tab.from === null) {
        loadThreads();
        openThread(routeID());
      } else if (view) {
        loadPresence(view);
        loadReceipts(view);
      }
    },
    onMessage: (name, data) => {
      let msg;
      try {
        msg = JSON.parse(data);
      } catch {
        return;
      }
      if (!msg || typeof msg !== "object") return;
      const v = view;
      if (name === "presence") return onPresence(v, msg);
      if (name === "receipt") return v && msg.thread === v.id && onReceipt(v, msg);
      if (name !== "message") return;
      if (typeof msg.gseq === "number") tab.gseq = msg.gseq;
      noteThread(msg);
      if (!v || msg.thread !== v.id) return;
      // One layout read and one scroll per frame, however many events
      // arrive in it: a burst must not force a layout per event.
      if (v.stick === null) {
        const near = isNearBottom();
        v.stick = requestAnimationFrame(() => {
          v.stick = null;
          if (near && v === view && v.cursor === null) scrollToBottom();
        });
      }
      addEvent(v, msg, true);
    },
    onError: (err) => {
      if (err.code === "cursor_ahead") {
        // The server's log is older than what we saw (restored from a
        // backup): start over from what it has.
        setConn("reset: " + err.message);
        tab.gseq = null;
        return true;
      }
      setConn("error: " + err.message);
      return true;
    },
  });
}

// addEvent renders ev once (dedupe by seq) in seq order. Live events (from
// the stream, not history pages) also refresh the state after a control.
// It reports whether the event was new.
function addEvent(v, ev, live) {
  if (typeof ev.seq !== "number" || v.nodes.has(ev.seq)) return false;
  const node = renderEvent(v, ev);
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
  markPartyGroups(node);
  if (v.cursor !== null && ev.seq > v.cursor) node.classList.add("future");
  if ((ev.type === "thread.renamed" || ev.type === "thread.created") && ev.seq === v.last && typeof ev.content === "string") {
    $("thread-title").textContent = ev.content;
  }
  if (live) {
    // While party mode is on, a person's message may end it (an exit word).
    const partyOn = v.liveState && v.liveState.party && v.liveState.party.on;
    if (ev.type === "control" || ev.type === "scene.closed" || (ev.meta && ev.meta.scene) || (ev.type === "message" && partyOn)) refreshState(v);
  }
  renderRevision();
  return true;
}

async function loadOlder(v) {
  if (v.loadingOlder || v.first <= 1 || v !== view) return;
  v.loadingOlder = true;
  const box = $("events");
  const oldHeight = box.scrollHeight;
  try {
    const res = await api.get(`/threads/${encodeURIComponent(v.id)}/events?until=${v.first - 1}&tail=${PAGE}`, { signal: v.ctrl.signal });
    if (v !== view) return;
    const evs = res.events || [];
    for (let i = evs.length - 1; i >= 0; i--) addEvent(v, evs[i]);
    if (!evs.length || evs[0].seq <= 1) {
      v.first = 1;
      markStart();
    }
    box.scrollTop += box.scrollHeight - oldHeight;
    if (evs.length) loadReceipts(v);
  } catch (err) {
    if (v === view) showComposerError(err.message);
  } finally {
    v.loadingOlder = false;
  }
}

function markStart() {
  $("older").textContent = "Start of thread";
}

function isNearBottom() {
  const box = $("events");
  return box.scrollHeight - box.scrollTop - box.clientHeight < 80;
}

function scrollToBottom() {
  const box = $("events");
  box.scrollTop = box.scrollHeight;
}

// ------------------------------------------------------------ rendering

function profileOf(v, id) {
  const st = v.liveState || v.state;
  const inv = st && st.participants && (st.participants.invited || []).find((p) => p.id === id);
  return inv ? inv.profile || {} : null;
}

function senderLabel(v, id) {
  const p = profileOf(v, id);
  if (!p) return { name: id, detail: "" };
  const name = p.nickname ? `${p.nickname} (${id})` : id;
  const detail = [p.client, p.model].filter(Boolean).join(" / ");
  return { name, detail };
}

function shortTime(ts) {
  const d = new Date(ts);
  if (isNaN(d)) return ts;
  const today = new Date();
  return d.toDateString() === today.toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
}

function contentText(ev) {
  return typeof ev.content === "string" ? ev.content : JSON.stringify(ev.content);
}

function describeControl(ev) {
  let c = ev.content;
  if (typeof c === "string") {
    try {
      c = JSON.parse(c);
    } catch {
      return contentText(ev);
    }
  }
  if (!c || typeof c !== "object") return contentText(ev);
  const parts = [];
  for (const [k, val] of Object.entries(c)) {
    switch (k) {
      case "invite": {
        const p = (val && val.profile) || {};
        parts.push(`invited ${val && val.participant_id} (${[p.client, p.model].filter(Boolean).join(" / ")})`);
        break;
      }
      case "uninvite":
        parts.push(`uninvited ${val && val.participant_id}`);
        break;
      case "mute":
        parts.push(`muted ${((val && val.targets) || []).join(", ")}`);
        break;
      case "unmute":
        parts.push(`unmuted ${((val && val.targets) || []).join(", ")}`);
        break;
      case "pause":
        parts.push(val && val.on ? "paused the thread" : "resumed the thread");
        break;
      case "discussion":
        parts.push(`turned discussion mode ${val && val.on ? "on" : "off"}` + (val && val.on ? (val.allow_agent_mentions === false ? " (agents may not mention)" : " (agents may mention)") : ""));
        break;
      case "invited_auto":
        parts.push(`turned invited auto-reply ${val && val.on ? "on" : "off"}`);
        break;
      case "prod":
        parts.push(`prodded ${(Array.isArray(val) ? val : []).join(", ")}`);
        break;
      case "scene":
        parts.push(val && val.on ? `started a scene with ${((val && val.actors) || []).join(", ")}` : "closed the scene");
      case "party":
        parts.push(val && val.on ? `turned party mode on (${partyText(val)})` : "turned party mode off");
        break;
      default:
        parts.push(`${k}: ${JSON.stringify(val)}`);
    }
  }
  return parts.join("; ");
}

const BADGES = ["coordinator", "error", "loop-guard", "clarification", "party", "question"];

// partyText words party settings: how many agents, from whom, reactions.
function partyText(p) {
  const agents = Array.isArray(p.agents) && p.agents.length ? p.agents.join(", ") : "everyone";
  const max = p.max_agents || 2;
  return `up to ${max} of ${agents}, ${p.cross_talk === false ? "no reactions" : "with reactions"}`;
}

// partyRound returns meta.party of a party reply ({round, trigger}) or null.
function partyRound(meta) {
  const p = meta && meta.party;
  return p && typeof p === "object" && (p.round === 1 || p.round === 2) && typeof p.trigger === "string" ? p : null;
}

// markPartyGroups shows a party round's replies as one group: each reply
// carries its group (trigger and round), and the first of a run of
// neighbours with the same group starts it, with the group's title.
function markPartyGroups(node) {
  for (const n of [node, node.nextElementSibling]) {
    if (!n || !n.dataset.partyGroup) continue;
    const prev = n.previousElementSibling;
    n.classList.toggle("party-start", !prev || prev.dataset.partyGroup !== n.dataset.partyGroup);
  }
}

function renderEvent(v, ev) {
  const meta = ev.meta || {};
  const tags = Array.isArray(meta.tags) ? meta.tags : [];
  const node = el("article", "event type-" + String(ev.type).replace(/[^a-z0-9_-]/g, "-"));
  node.dataset.seq = ev.seq;
  if (ev.id) node.dataset.id = ev.id;
  for (const t of BADGES) if (tags.includes(t)) node.classList.add("tag-" + t);
  const party = partyRound(meta);
  if (party) {
    node.classList.add("party-reply", "party-round-" + party.round);
    node.dataset.partyGroup = `${party.trigger}:${party.round}`;
    node.dataset.partyTitle = party.round === 1 ? "Party · round 1 — first takes" : "Party · round 2 — reactions";
  }

  const head = el("header", "event-head");
  const who = senderLabel(v, ev.from);
  const from = el("span", "sender", who.name);
  from.dataset.from = ev.from;
  head.append(from);
  const detail = el("span", "profile", who.detail);
  detail.dataset.from = ev.from;
  head.append(detail);
  if (ev.type === "message") head.append(el("span", "to", "→ " + (ev.to || "all")));
  const time = el("time", "ts", shortTime(ev.ts));
  time.dateTime = ev.ts || "";
  time.title = `${ev.ts} · revision ${ev.seq}`;
  head.append(time);
  for (const t of BADGES) if (tags.includes(t)) head.append(el("span", "badge badge-" + t, t));
  if (meta.reply_to) {
    const target = v.events.get(v.byID.get(meta.reply_to));
    const r = el("button", "reply-link", "↩ " + (target ? "reply to " + target.from : "reply"));
    r.type = "button";
    r.title = "Show the message this replies to";
    r.addEventListener("click", () => showEvent(v, meta.reply_to));
    head.append(r);
  }
  if (ev.type === "message") {
    const rb = el("button", "reply-btn", "Reply");
    rb.type = "button";
    rb.addEventListener("click", () => setReply(ev));
    head.append(rb);
  }
  if (ev.type === "message" && tags.includes("question")) {
    // An agent's [USER QUESTION]: it waits for the person it is addressed
    // to, who answers it in one click (reply_to set, sent to the asker).
    node.dataset.to = ev.to || "all";
    const ab = el("button", "answer-btn", "Answer");
    ab.type = "button";
    ab.title = `Answer ${ev.from}'s question`;
    ab.addEventListener("click", () => answerQuestion(ev));
    head.append(ab);
    markQuestion(node);
  }
  node.append(head);

  const body = el("div", "event-body");
  if (meta.private === true) {
    // Private to its sender (an actor's thinking or journal): shown to
    // people, collapsed, and never sent to another participant.
    node.classList.add("private");
    const d = el("details", "private");
    d.append(el("summary", "", `private ${ev.type} of ${ev.from}`));
    d.append(renderMarkdown(contentText(ev)));
    body.append(d);
  } else if (ev.type === "message") body.append(renderMarkdown(contentText(ev)));
  else if (ev.type === "scene.closed") body.textContent = `the scene closed (${contentText(ev)})`;
  else if (ev.type === "control") body.textContent = describeControl(ev);
  else if (ev.type === "thread.created") body.textContent = `created the thread “${contentText(ev)}”`;
  else if (ev.type === "thread.renamed") body.textContent = `renamed the thread to “${contentText(ev)}”`;
  else body.textContent = `${ev.type}: ${contentText(ev)}`;
  node.append(body);
  if (ev.type === "message" || ev.type === "control") {
    const box = el("div", "receipts");
    box.hidden = true;
    node.append(box);
    if (ev.id) paintReceipts(v, ev.id, box);
  }
  return node;
}

// refreshSenderLabels updates names and profiles once the participant list
// is known, touching only the label nodes.
function refreshSenderLabels(v) {
  for (const span of $("event-list").querySelectorAll(".sender, .profile")) {
    const who = senderLabel(v, span.dataset.from);
    const text = span.classList.contains("sender") ? who.name : who.detail;
    if (span.textContent !== text) span.textContent = text;
  }
}

async function showEvent(v, id) {
  for (let i = 0; i < 100 && !v.byID.has(id) && v.first > 1 && v === view; i++) await loadOlder(v);
  const node = v.nodes.get(v.byID.get(id));
  if (!node) return;
  node.scrollIntoView({ block: "center" });
  node.classList.remove("highlight");
  void node.offsetWidth;
  node.classList.add("highlight");
}

// ------------------------------------------------------- revision cursor

function head(v) {
  return v.last;
}

function setCursor(v, n) {
  const h = head(v);
  if (n !== null && (n >= h || h === 0)) n = null;
  if (n !== null && n < 1) n = 1;
  const old = v.cursor === null ? h : v.cursor;
  const now = n === null ? h : n;
  v.cursor = n;
  const lo = Math.min(old, now);
  const hi = Math.max(old, now);
  for (let s = lo + 1; s <= hi; s++) {
    const node = v.nodes.get(s);
    if (node) node.classList.toggle("future", now < s);
  }
  if (n !== null && n < v.first) {
    (async () => {
      for (let i = 0; i < 1000 && v === view && v.cursor !== null && v.cursor < v.first && v.first > 1; i++) await loadOlder(v);
    })();
  }
  renderRevision();
  refreshState(v);
  const node = v.nodes.get(now);
  if (node && n !== null) node.scrollIntoView({ block: "nearest" });
  else if (n === null) scrollToBottom();
}

function renderRevision() {
  const v = view;
  if (!v) return;
  const h = head(v);
  const at = v.cursor === null ? h : v.cursor;
  $("rev-label").textContent = h ? `${at} / ${h}` : "";
  $("rev-back").disabled = at <= 1;
  $("rev-forward").disabled = v.cursor === null;
  const past = v.cursor !== null;
  $("revision-banner").hidden = !past;
  if (past) $("revision-text").textContent = `Viewing revision ${v.cursor} of ${h}`;
  document.body.classList.toggle("viewing-past", past);
  for (const id of ["message-input", "send-btn", "to-select", "rename-btn", "inv-client", "inv-model", "inv-nickname", "inv-roles", "inv-expertise", "inv-character", "inv-id", "inv-submit", "ctl-pause", "ctl-discussion", "ctl-agent-mentions", "ctl-auto", "ctl-party", "ctl-party-max", "ctl-party-cross"]) {
    $(id).disabled = past;
  }
  for (const b of $("participant-list").querySelectorAll("button")) b.disabled = past;
}

// ------------------------------------------------------- state and panel

async function refreshState(v) {
  const req = ++v.stateReq;
  const at = v.cursor;
  const q = at === null ? "" : `?at=${at}`;
  try {
    const res = await api.get(`/threads/${encodeURIComponent(v.id)}/state${q}`, { signal: v.ctrl.signal });
    if (v !== view || req !== v.stateReq) return;
    const st = res.state || {};
    v.state = st;
    if (at === null) {
      v.liveState = st;
      refreshSenderLabels(v);
    }
    renderPanel(v);
  } catch (err) {
    if (v === view && err.name !== "AbortError") showControlError(err.message);
  }
}

function renderPanel(v) {
  const st = v.state || {};
  const muted = new Set([...(st.muted || []), ...(st.soft_muted || [])]);
  const disc = st.discussion || {};
  const auto = st.invited_auto || {};
  const invited = (st.participants && st.participants.invited) || [];
  $("ctl-pause").checked = !!st.paused;
  $("ctl-discussion").checked = !!disc.on;
  $("ctl-agent-mentions").checked = !!disc.allow_agent_mentions;
  $("ctl-auto").checked = !!auto.on;
  const party = st.party || {};
  $("ctl-party").checked = !!party.on;
  if (document.activeElement !== $("ctl-party-max")) $("ctl-party-max").value = party.max_agents || 2;
  $("ctl-party-cross").checked = party.cross_talk !== false;
  const summary = [];
  summary.push(st.paused ? "paused" : "running");
  if (disc.on) summary.push("discussion on");
  if (auto.on) summary.push("auto-reply on");
  if (party.on) summary.push(`party on (${partyText(party)})`);
  if (muted.size) summary.push("muted: " + [...muted].join(", "));
  summary.push(`${invited.length} invited`);
  const asOf = v.cursor === null ? "live" : `as of revision ${v.cursor}`;
  $("state-summary").textContent = `${summary.join(" · ")} (${asOf})`;

  // Participants are updated in place, keyed by id, so a refresh never
  // swaps a button out from under a click.
  const list = $("participant-list");
  const keep = new Set(invited.map((p) => p.id));
  for (const li of Array.from(list.children)) if (!keep.has(li.dataset.id)) li.remove();
  let prev = null;
  for (const p of invited) {
    let li = list.querySelector(`.participant[data-id="${CSS.escape(p.id)}"]`);
    if (!li) li = participantNode(p.id);
    updateParticipant(li, p, muted.has(p.id));
    const want = prev ? prev.nextSibling : list.firstChild;
    if (want !== li) list.insertBefore(li, want);
    prev = li;
  }
  renderScene(v);
  renderPresence(v);
  renderRecipients(v);
  renderRevision();
}

// renderScene shows the thread's scene, if it ever had one, above the
// events: status, each actor's turns (the next speaker in bold) and caps.
function renderScene(v) {
  const sc = (v.state || {}).scene;
  const box = $("scene-header");
  box.hidden = !sc;
  if (!sc) return;
  let status = `Scene ${sc.status}`;
  if (sc.close_reason) status += ` (${sc.close_reason})`;
  $("scene-status").textContent = status;
  const actors = $("scene-actors");
  actors.textContent = "";
  for (const a of sc.actors || []) {
    const span = el("span", "scene-actor", `${a}: ${(sc.turns || {})[a] || 0} turns`);
    span.dataset.actor = a;
    if (sc.on && sc.next === a) span.classList.add("next");
    actors.append(span);
  }
  $("scene-caps").textContent = `soft cap ${sc.soft_cap} · hard cap ${sc.hard_cap} per actor`;
}

function participantNode(id) {
  const li = el("li", "participant");
  li.dataset.id = id;
  const top = el("div", "p-top");
  const dot = el("span", "presence");
  dot.dataset.id = id;
  const badge = el("span", "badge badge-muted", "muted");
  top.append(dot, el("span", "p-name"), badge);
  const btns = el("div", "p-actions");
  const mk = (label, cls, fn) => {
    const b = el("button", cls, label);
    b.type = "button";
    b.addEventListener("click", fn);
    btns.append(b);
    return b;
  };
  mk("Mute", "mute", () => control({ mute: { targets: [id], mode: "hard" } }));
  mk("Unmute", "unmute", () => control({ unmute: { targets: [id] } }));
  mk("Prod", "prod", () => control({ prod: [id] }));
  mk("Uninvite", "uninvite", () => control({ uninvite: { participant_id: id } }));
  // Stop cancels the participant's running and queued invocations here;
  // renderPresence shows it only while the participant is thinking.
  mk("Stop", "stop", () => control({ cancel: { participant_id: id } })).hidden = true;
  const state = el("div", "p-state");
  li.append(top, el("div", "p-detail"), el("div", "p-expertise"), state, btns);
  return li;
}

function updateParticipant(li, p, muted) {
  const prof = p.profile || {};
  const set = (sel, text) => {
    const e = li.querySelector(sel);
    if (e.textContent !== text) e.textContent = text;
  };
  set(".p-name", prof.nickname ? `${prof.nickname} (${p.id})` : p.id);
  const roles = (prof.roles || []).join(", ");
  set(".p-detail", [prof.client, prof.model].filter(Boolean).join(" / ") + (roles ? " · " + roles : ""));
  const expertise = (prof.expertise || []).join(", ");
  set(".p-expertise", expertise ? "knows: " + expertise : "");
  li.querySelector(".p-expertise").hidden = !expertise;
  li.querySelector(".badge-muted").hidden = !muted;
  li.querySelector("button.mute").hidden = muted;
  li.querySelector("button.unmute").hidden = !muted;
}

// renderRecipients fills the `to` dropdown with everyone invited (online or
// not), keeping the current choice when it is still there.
function renderRecipients(v) {
  const st = v.liveState || {};
  const sel = $("to-select");
  const cur = sel.value;
  const ids = ["all", ...((st.participants && st.participants.invited) || []).map((p) => p.id)];
  if (ids.join("\n") === Array.from(sel.options).map((o) => o.value).join("\n")) return;
  const opts = ids.map((id) => {
    const o = el("option", null, id);
    o.value = id;
    return o;
  });
  if (cur && !ids.includes(cur)) {
    const o = el("option", null, cur);
    o.value = cur;
    opts.push(o);
  }
  sel.replaceChildren(...opts);
  sel.value = cur || "all";
}

async function control(content) {
  const v = view;
  if (!v || v.cursor !== null) return;
  $("control-error").hidden = true;
  try {
    await api.post(`/threads/${encodeURIComponent(v.id)}/events`, { type: "control", from: sender(), content }, { signal: v.ctrl.signal });
  } catch (err) {
    if (v === view) showControlError(err.message);
  }
  if (v === view) refreshState(v);
}

function showControlError(msg) {
  const e = $("control-error");
  e.textContent = msg;
  e.hidden = false;
}

// ---------------------------------------------------------------- presence

// Presence goes stale after the server's TTL without anything being sent,
// so staleness is computed here, from updated_at and the server's clock as
// estimated from the last live change (clockSkew = local - server).
let presenceTTL = 120000;
let clockSkew = 0;
// presenceReq counts presence loads and changes; an entry's streamed says
// after which load it arrived.
let presenceReq = 0;

async function loadPresence(v) {
  const asked = ++presenceReq;
  try {
    const res = await api.get(`/threads/${encodeURIComponent(v.id)}/presence`, { signal: v.ctrl.signal });
    if (v !== view) return;
    if (typeof res.ttl_seconds === "number" && res.ttl_seconds > 0) presenceTTL = res.ttl_seconds * 1000;
    const fresh = new Map();
    for (const p of res.participants || []) {
      // The server's stale flag stands: time only makes it staler.
      p.staleAtLoad = !!p.stale;
      fresh.set(p.id, p);
    }
    // A change streamed while this answer travelled may be newer: keep it.
    for (const [id, p] of v.presence) {
      const got = fresh.get(id);
      if (p.streamed > asked && (!got || String(p.updated_at) > String(got.updated_at))) fresh.set(id, p);
    }
    v.presence = fresh;
    renderPresence(v);
  } catch {
    // Presence is a hint; the stream's next connection loads it again.
  }
}

function onPresence(v, p) {
  const at = Date.parse(p.updated_at);
  if (!isNaN(at)) clockSkew = Date.now() - at;
  if (!v || p.thread !== v.id || typeof p.id !== "string") return;
  p.streamed = ++presenceReq;
  v.presence.set(p.id, p);
  renderPresence(v);
}

// markStale sets each entry's stale flag as of now; it reports whether one
// changed.
function markStale(v) {
  const now = Date.now() - clockSkew;
  let changed = false;
  for (const p of v.presence.values()) {
    const at = Date.parse(p.updated_at);
    const stale = !!p.staleAtLoad || (!isNaN(at) && now - at > presenceTTL);
    if (stale !== !!p.stale) changed = true;
    p.stale = stale;
  }
  return changed;
}

// ---------------------------------------------------------------- receipts

// loadReceipts (re)loads the receipts of the events shown: those from the
// first loaded event on (event ids sort in append order).
async function loadReceipts(v) {
  const first = v.events.get(v.first);
  const from = first && first.id ? `?from_event=${encodeURIComponent(first.id)}` : "";
  try {
    const res = await api.get(`/threads/${encodeURIComponent(v.id)}/receipts${from}`, { signal: v.ctrl.signal });
    if (v !== view) return;
    v.receipts = new Map();
    for (const r of res.receipts || []) putReceipt(v, r);
    for (const id of v.receipts.keys()) paintReceipts(v, id);
  } catch {
    // Receipts are a hint; the stream and the next reconnect bring them.
  }
}

function putReceipt(v, r) {
  let m = v.receipts.get(r.event);
  if (!m) v.receipts.set(r.event, (m = new Map()));
  m.set(r.participant, r);
}

function onReceipt(v, r) {
  if (typeof r.event !== "string") return;
  putReceipt(v, r);
  paintReceipts(v, r.event);
}

// paintReceipts redraws the receipt lines under one event, if it is shown.
function paintReceipts(v, eventID, box) {
  if (!box) {
    const node = v.nodes.get(v.byID.get(eventID));
    box = node && node.querySelector(".receipts");
  }
  if (!box) return;
  drawReceipts(box, v.receipts.get(eventID), v.presence, (id) => senderLabel(v, id).name, (id) => showEvent(v, id), Date.now());
}

// tick keeps the "running 12 s" lines counting and turns presence stale
// when its TTL passes, while the view is open.
async function tick(v) {
  while (v === view && !v.ctrl.signal.aborted) {
    await api.sleep(1000, v.ctrl.signal);
    if (v !== view || document.hidden) continue;
    if (markStale(v)) renderPresence(v);
    else paintRunning(v);
  }
}

function paintRunning(v) {
  for (const [id, m] of v.receipts) {
    for (const r of m.values()) {
      if (r.state === "running") {
        paintReceipts(v, id);
        break;
      }
    }
  }
}

// showRunsLink points the header's Runs link at the coordinator's
// dashboard, whose address the bridge was told (serve --coordinator-url).
async function showRunsLink() {
  try {
    const res = await fetch("/ui/config.json", { cache: "no-store" });
    const cfg = await res.json();
    if (cfg && typeof cfg.coordinator_url === "string" && /^https?:\/\//.test(cfg.coordinator_url)) {
      const a = $("runs-link");
      a.href = cfg.coordinator_url.replace(/\/+$/, "") + "/";
      a.hidden = false;
    }
  } catch {
    // No link then.
  }
}

function renderPresence(v) {
  markStale(v);
  paintRunning(v);
  for (const dot of $("participant-list").querySelectorAll(".presence")) {
    const p = v.presence.get(dot.dataset.id);
    const state = !p || p.stale ? "offline" : p.state;
    dot.className = "presence state-" + state;
    dot.title = state;
    const li = dot.closest(".participant");
    li.dataset.presence = state;
    // While thinking, the adapter's latest progress status says what it
    // is doing (contract 5.3).
    const status = state === "thinking" && p.details && typeof p.details.status === "string" ? p.details.status : "";
    const text = status ? `${state} · ${status}` : state;
    const label = li.querySelector(".p-state");
    if (label.textContent !== text) label.textContent = text;
    li.querySelector("button.stop").hidden = state !== "thinking";
  }
}

// ---------------------------------------------------------------- composer

function showComposerError(msg) {
  const e = $("composer-error");
  e.textContent = msg;
  e.hidden = !msg;
}

function setReply(ev) {
  if (view) view.replyTo = ev ? ev.id : null;
  $("reply-indicator").hidden = !ev;
  $("reply-text").textContent = ev ? `Replying to ${ev.from}: ${contentText(ev).slice(0, 80)}` : "";
  if (ev) $("message-input").focus();
}

// markQuestion highlights a question when it is addressed to the viewer
// (the "from" field), so a person sees at once what waits for them.
function markQuestion(node) {
  node.classList.toggle("question-for-me", node.dataset.to === sender());
}

function markQuestions() {
  for (const node of $("event-list").querySelectorAll(".event.tag-question")) markQuestion(node);
}

function answerQuestion(ev) {
  setReply(ev);
  const sel = $("to-select");
  if (Array.from(sel.options).some((o) => o.value === ev.from)) sel.value = ev.from;
}

async function send() {
  const v = view;
  if (!v || v.cursor !== null) return;
  const input = $("message-input");
  const text = input.value;
  if (!text.trim()) return;
  const body = { from: sender(), to: $("to-select").value || "all", content: text };
  if (v.replyTo) body.meta = { reply_to: v.replyTo };
  $("send-btn").disabled = true;
  try {
    await api.post(`/threads/${encodeURIComponent(v.id)}/events`, body, { signal: v.ctrl.signal });
    if (v !== view) return;
    input.value = "";
    showComposerError("");
    setReply(null);
  } catch (err) {
    if (v === view) showComposerError(err.message);
  } finally {
    $("send-btn").disabled = v.cursor !== null;
  }
}

// Mention autocomplete over invited ids and nicknames.
let mention = null; // {start, items, index}

function mentionCandidates(prefix) {
  const st = view && view.liveState;
  const invited = (st && st.participants && st.participants.invited) || [];
  const p = prefix.toLowerCase();
  const out = [];
  for (const inv of invited) {
    const nick = (inv.profile && inv.profile.nickname) || "";
    // One entry per participant: the id when it matches (mentions resolve
    // ids first), else the nickname.
    let name = null;
    if (inv.id.toLowerCase().startsWith(p)) name = inv.id;
    else if (nick && nick.toLowerCase().startsWith(p)) name = nick;
    if (name) out.push({ name, id: inv.id, label: nick && nick !== inv.id ? `${inv.id} (${nick})` : inv.id });
  }
  return out;
}

function updateMention() {
  const input = $("message-input");
  const upto = input.value.slice(0, input.selectionStart);
  const m = upto.match(/(^|[\s(])@([\w.@:-]*)$/);
  const list = $("mention-list");
  if (!m) {
    mention = null;
    list.hidden = true;
    return;
  }
  const items = mentionCandidates(m[2]);
  if (!items.length) {
    mention = null;
    list.hidden = true;
    return;
  }
  mention = { start: upto.length - m[2].length, end: input.selectionStart, items, index: 0 };
  renderMention();
}

function renderMention() {
  const list = $("mention-list");
  list.replaceChildren(
    ...mention.items.map((it, i) => {
      const li = el("li", "mention" + (i === mention.index ? " selected" : ""), it.label);
      li.setAttribute("role", "option");
      li.addEventListener("mousedown", (e) => {
        e.preventDefault();
        mention.index = i;
        acceptMention();
      });
      return li;
    }),
  );
  list.hidden = false;
}

function acceptMention() {
  const input = $("message-input");
  const it = mention.items[mention.index];
  const before = input.value.slice(0, mention.start);
  const after = input.value.slice(mention.end);
  input.value = before + it.name + " " + after;
  const pos = before.length + it.name.length + 1;
  input.setSelectionRange(pos, pos);
  mention = null;
  $("mention-list").hidden = true;
}

function onComposerKey(e) {
  if (mention && !$("mention-list").hidden) {
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      const n = mention.items.length;
      mention.index = (mention.index + (e.key === "ArrowDown" ? 1 : n - 1)) % n;
      renderMention();
      return;
    }
    if (e.key === "Enter" || e.key === "Tab") {
      e.preventDefault();
      acceptMention();
      return;
    }
    if (e.key === "Escape") {
      mention = null;
      $("mention-list").hidden = true;
      return;
    }
  }
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
}

// ------------------------------------------------------------------ invite

let idEdited = false;

function suggestID() {
  if (idEdited) return;
  const base = ($("inv-nickname").value.trim() || $("inv-client").value.trim() || "agent")
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[^a-z0-9]+/, "")
    .slice(0, 60) || "agent";
  const st = view && view.liveState;
  const taken = new Set(((st && st.participants && st.participants.invited) || []).map((p) => p.id));
  let id = base;
  for (let i = 2; taken.has(id); i++) id = `${base}-${i}`;
  $("inv-id").value = id;
}

async function invite() {
  const profile = { client: $("inv-client").value.trim(), model: $("inv-model").value.trim() };
  const nick = $("inv-nickname").value.trim();
  if (nick) profile.nickname = nick;
  const roles = $("inv-roles").value.split(",").map((r) => r.trim()).filter(Boolean);
  if (roles.length) profile.roles = roles;
  const character = $("inv-character").value.trim();
  if (character) profile.character = character;
  const expertise = $("inv-expertise").value.split(",").map((r) => r.trim()).filter(Boolean);
  if (expertise.length) profile.expertise = expertise;
  const id = $("inv-id").value.trim();
  await control({ invite: { participant_id: id, profile } });
  if ($("control-error").hidden) {
    $("invite-form").reset();
    idEdited = false;
  }
}

// ------------------------------------------------------------------ rename

function startRename() {
  $("rename-input").value = $("thread-title").textContent;
  $("rename-form").hidden = false;
  $("thread-title").hidden = true;
  $("rename-btn").hidden = true;
  $("rename-input").focus();
}

function endRename() {
  $("rename-form").hidden = true;
  $("thread-title").hidden = false;
  $("rename-btn").hidden = false;
}

async function rename() {
  const v = view;
  const name = $("rename-input").value.trim();
  if (!v || !name) return;
  try {
    await api.post(`/threads/${encodeURIComponent(v.id)}/events`, { type: "thread.renamed", from: sender(), content: name }, { signal: v.ctrl.signal });
    endRename();
  } catch (err) {
    showControlError(err.message);
  }
}

// -------------------------------------------------------------------- misc

function setConn(status) {
  const c = $("conn-status");
  c.textContent = status;
  c.dataset.status = status.split(":")[0];
}

// tokenTried is whether the person has given a token yet: the first 401
// only asks, a later one says why the token was refused.
let tokenTried = false;

function askToken(err) {
  const d = $("token-dialog");
  const msg = $("token-error");
  if (tokenTried) {
    msg.textContent = err && err.message ? err.message : "The token was refused.";
    msg.hidden = false;
  }
  if (!d.open) d.showModal();
  $("token-input").focus();
}

function wire() {
  const saved = localStorage.getItem(SENDER_KEY);
  if (saved) $("sender").value = saved;
  $("sender").addEventListener("change", () => {
    localStorage.setItem(SENDER_KEY, sender());
    markQuestions();
  });

  $("new-thread").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await createThread($("new-thread-name").value.trim());
      $("new-thread-name").value = "";
    } catch (err) {
      setConn("error: " + err.message);
    }
  });
  $("thread-search").addEventListener("input", renderThreads);

  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    send();
  });
  $("message-input").addEventListener("keydown", onComposerKey);
  $("message-input").addEventListener("input", updateMention);
  $("message-input").addEventListener("blur", () => {
    mention = null;
    $("mention-list").hidden = true;
  });
  $("reply-cancel").addEventListener("click", () => setReply(null));

  $("rename-btn").addEventListener("click", startRename);
  $("rename-cancel").addEventListener("click", endRename);
  $("rename-form").addEventListener("submit", (e) => {
    e.preventDefault();
    rename();
  });

  $("rev-back").addEventListener("click", () => view && setCursor(view, (view.cursor === null ? head(view) : view.cursor) - 1));
  $("rev-forward").addEventListener("click", () => view && view.cursor !== null && setCursor(view, view.cursor + 1));
  $("jump-live").addEventListener("click", () => view && setCursor(view, null));

  $("events").addEventListener("scroll", () => {
    if (view && $("events").scrollTop < 60) loadOlder(view);
  });

  $("ctl-pause").addEventListener("change", (e) => control({ pause: { on: e.target.checked } }));
  const disc = () => control({ discussion: { on: $("ctl-discussion").checked, allow_agent_mentions: $("ctl-agent-mentions").checked } });
  $("ctl-discussion").addEventListener("change", () => {
    $("ctl-agent-mentions").checked = $("ctl-discussion").checked;
    disc();
  });
  $("ctl-agent-mentions").addEventListener("change", disc);
  $("ctl-auto").addEventListener("change", (e) => control({ invited_auto: { on: e.target.checked } }));
  // The party's settings apply when it is switched on, and again when one
  // changes while it is on.
  const party = () => {
    if (!$("ctl-party").checked) return control({ party: { on: false } });
    const max = Math.min(16, Math.max(1, Number($("ctl-party-max").value) || 2));
    return control({ party: { on: true, max_agents: max, cross_talk: $("ctl-party-cross").checked } });
  };
  $("ctl-party").addEventListener("change", party);
  $("ctl-party-max").addEventListener("change", () => $("ctl-party").checked && party());
  $("ctl-party-cross").addEventListener("change", () => $("ctl-party").checked && party());

  $("inv-client").addEventListener("input", suggestID);
  $("inv-nickname").addEventListener("input", suggestID);
  $("inv-id").addEventListener("input", () => {
    idEdited = $("inv-id").value.trim() !== "";
  });
  $("invite-form").addEventListener("submit", (e) => {
    e.preventDefault();
    invite();
  });

  api.setUnauthorizedHandler(askToken);
  // Escape would close the dialog and leave every request waiting for a
  // token with no way to give one.
  $("token-dialog").addEventListener("cancel", (e) => e.preventDefault());
  $("token-form").addEventListener("submit", () => {
    $("token-error").hidden = true;
    tokenTried = true;
    api.login($("token-input").value.trim()).catch(askToken);
    $("token-input").value = "";
  });

  window.addEventListener("popstate", () => openThread(routeID()));
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      stopStream();
      return;
    }
    startStream();
  });
  document.addEventListener("animationend", (e) => {
    if (e.animationName === "flash") e.target.classList.remove("highlight");
  });
}

async function main() {
  wire();
  wireSuggestions();
  showRunsLink();
  // The stream's first connection loads the thread list and the thread.
  if (!document.hidden) startStream();
}

main();
