// threadlist.js: the thread list. Most recently updated first, each thread
// with its date, the first line of its last message and, per browser, how
// many messages arrived since it was last read here (localStorage, so each
// browser keeps its own count; a thread this browser has never listed
// counts as read up to where it was when first listed). It follows the
// stream ("connected", "message") and the open thread ("opened", "read");
// a tap on a thread is a link, which app.js follows.

import * as api from "./api.js";
import { $, el, shortDate, fullTime } from "./dom.js";
import { ui, sender } from "./shared.js";
import { subscribe } from "./bus.js";

const THREADS_PAGE = 500;
const READ_KEY = "agent-bridge-read";
// PREVIEWS is how many threads get their last message fetched at start;
// PREVIEW_TAIL how many events per thread are looked at for it.
const PREVIEWS = 40;
const PREVIEW_TAIL = 20;

let read = loadRead();

function loadRead() {
  try {
    const r = JSON.parse(localStorage.getItem(READ_KEY) || "{}");
    return r && typeof r === "object" ? r : {};
  } catch {
    return {};
  }
}

let saveTimer = null;

// saveRead writes the read positions at most twice a second: a burst of
// events in the open thread must not write the storage per event.
function saveRead() {
  if (saveTimer === null) saveTimer = setTimeout(flushRead, 500);
}

// flushRead writes the read positions now; the page calls it when it goes
// away (pagehide), so a reload right after reading loses nothing.
export function flushRead() {
  if (saveTimer !== null) clearTimeout(saveTimer);
  saveTimer = null;
  try {
    localStorage.setItem(READ_KEY, JSON.stringify(read));
  } catch {
    // A full or refused storage only costs the counts after a reload.
  }
}

const sortThreads = () => ui.threads.sort((a, b) => String(b.updated_at || "").localeCompare(String(a.updated_at || "")));

// countsAsUnread is whether an event is a message someone else wrote to be
// read (not a private thought, not the viewer's own).
const countsAsUnread = (ev) => ev.type === "message" && !(ev.meta && ev.meta.private === true) && ev.from !== sender();

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
    const old = new Map(ui.threads.map((t) => [t.id, t]));
    for (const t of all) {
      const o = old.get(t.id);
      t.unseen = o ? o.unseen : new Set();
      t.unread = t.unseen.size;
      t.last = o ? o.last : null;
      if (typeof read[t.id] !== "number" && typeof t.last_seq === "number") read[t.id] = t.last_seq;
    }
    saveRead();
    ui.threads = all;
    sortThreads();
    renderThreads();
    loadPreviews(all.slice(0, PREVIEWS));
  } catch (err) {
    $("conn-status").textContent = "error: " + err.message;
  }
}

// loadPreviews reads the last events of threads, a few at a time, for their
// last message and unread count.
async function loadPreviews(list) {
  const queue = list.slice();
  const worker = async () => {
    for (let t; (t = queue.shift()); ) {
      try {
        const res = await api.get(`/threads/${encodeURIComponent(t.id)}/events?tail=${PREVIEW_TAIL}`);
        const evs = res.events || [];
        const seen = read[t.id] || 0;
        // A set of seqs, so that an event both read here and streamed
        // counts once.
        for (const ev of evs) {
          if (countsAsUnread(ev) && ev.seq > seen) t.unseen.add(ev.seq);
          if (ev.type === "message" && !(ev.meta && ev.meta.private === true)) t.last = preview(ev);
        }
        t.unread = t.unseen.size;
        t.unreadMore = t.unread > 0 && evs.length === PREVIEW_TAIL && evs[0].seq > seen + 1;
      } catch {
        // A preview is a hint; the list works without it.
      }
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  renderThreads();
}

function preview(ev) {
  const text = typeof ev.content === "string" ? ev.content : "";
  const line = text.split("\n").find((l) => l.trim()) || "";
  return { from: ev.from, text: line.replace(/[*_`#>]/g, "").trim().slice(0, 140), ts: ev.ts };
}

let threadsShown = "";
let threadsFrame = null;

// noteThread keeps the list current from one streamed event: a new thread,
// a new name, a new last message, one more unread.
function noteThread(ev, live) {
  if (typeof ev.thread !== "string" || !ev.thread) return;
  let t = ui.threads.find((x) => x.id === ev.thread);
  if (!t) {
    ui.threads.push((t = { id: ev.thread, name: ev.thread, updated_at: "", unread: 0, unseen: new Set(), last: null }));
    if (typeof read[t.id] !== "number") read[t.id] = Math.max(0, (ev.seq || 1) - 1);
  }
  if ((ev.type === "thread.created" || ev.type === "thread.renamed") && typeof ev.content === "string") t.name = ev.content;
  if (typeof ev.ts === "string" && ev.ts > String(t.updated_at || "")) t.updated_at = ev.ts;
  if (typeof ev.seq === "number" && ev.seq > (t.last_seq || 0)) t.last_seq = ev.seq;
  if (ev.type === "message" && !(ev.meta && ev.meta.private === true)) t.last = preview(ev);
  if (live && countsAsUnread(ev) && ev.seq > (read[t.id] || 0)) {
    t.unseen.add(ev.seq);
    t.unread = t.unseen.size;
  }
  sortThreads();
  // One redraw per frame, however many events a burst brings.
  if (threadsFrame === null) {
    threadsFrame = requestAnimationFrame(() => {
      threadsFrame = null;
      renderThreads();
    });
  }
}

// markRead records that the viewer has seen thread id up to seq.
function markRead(id, seq) {
  const t = ui.threads.find((x) => x.id === id);
  const had = t && (t.unread || t.unreadMore);
  if (typeof seq === "number" && seq > (read[id] || 0)) {
    read[id] = seq;
    saveRead();
  }
  if (t) {
    t.unseen.clear();
    t.unread = 0;
    t.unreadMore = false;
  }
  if (had) renderThreads();
}

// renderThreads redraws the list only when what it shows changed, so an
// update does not swap links out from under a click.
export function renderThreads() {
  const q = $("thread-search").value.trim().toLowerCase();
  const v = ui.view;
  const sig = JSON.stringify([q, v && v.id, ui.threads.map((t) => [t.id, t.name, t.updated_at, t.unread, t.unreadMore, t.last && t.last.text])]);
  if (sig === threadsShown) return;
  threadsShown = sig;
  const items = [];
  for (const t of ui.threads) {
    const name = t.name || t.id;
    if (q && !name.toLowerCase().includes(q)) continue;
    const li = el("li", "thread-item" + (v && v.id === t.id ? " active" : "") + (t.unread ? " has-unread" : ""));
    li.dataset.id = t.id;
    // The whole row is the link: a tap anywhere on it opens the thread.
    const a = el("a", "thread-link");
    a.href = "/ui/threads/" + encodeURIComponent(t.id);
    if (v && v.id === t.id) a.setAttribute("aria-current", "page");
    const top = el("span", "thread-top");
    const when = el("time", "thread-date", t.updated_at ? shortDate(t.updated_at) : "");
    when.dateTime = t.updated_at || "";
    when.title = t.updated_at ? fullTime(t.updated_at) : "";
    top.append(el("span", "thread-name", name), when);
    const bottom = el("span", "thread-bottom");
    bottom.append(el("span", "thread-preview", t.last ? `${t.last.from}: ${t.last.text}` : ""));
    if (t.unread || t.unreadMore) {
      const n = el("span", "unread", t.unreadMore ? `${t.unread}+` : String(t.unread));
      n.title = "unread messages";
      bottom.append(n);
    }
    a.append(top, bottom);
    li.append(a);
    items.push(li);
  }
  $("thread-list").replaceChildren(...items);
  const total = ui.threads.reduce((n, t) => n + (v && v.id === t.id ? 0 : t.unread || 0), 0);
  $("threads-toggle-count").textContent = total ? String(total) : "";
}

// createThread makes a thread and lists it; it returns the new thread's
// id, for the page to open.
export async function createThread(name) {
  const body = { from: sender() };
  if (name) body.name = name;
  const res = await api.post("/threads", body);
  // The stream brings the thread.created event too; listing it now means
  // the link is there before the page moves to it.
  noteThread({ thread: res.id, type: "thread.created", content: res.name, ts: res.updated_at, seq: 1 });
  renderThreads();
  return res.id;
}

subscribe("connected", ({ fresh }) => fresh && loadThreads());
subscribe("message", ({ ev }) => noteThread(ev, !ui.view || ev.thread !== ui.view.id || document.hidden));
subscribe("opened", renderThreads);
subscribe("read", ({ id, seq }) => markRead(id, seq));
