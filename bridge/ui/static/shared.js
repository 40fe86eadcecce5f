// shared.js: the little state the UI's modules share, and the few changes
// to it that several views make. The open thread's own state lives in its
// view object (thread.js); this holds the pointers to it and the settings
// every module reads, loads the thread's state (the panel draws it, and
// every name on the page comes from it) and moves the revision cursor.
// What changed is announced on the bus (bus.js: "state", "cursor").

import * as api from "./api.js";
import { $ } from "./dom.js";
import { publish } from "./bus.js";

// ui.view is the open thread (thread.js newView), null when none is open.
// ui.threads is the thread list (threadlist.js). ui.me is who this browser
// is (GET /auth/whoami, app.js): the id its credential writes as, and
// whether the bridge runs without tokens (serve --open), where the
// person picks whom to post as. ui.humans are the bridge's humans (GET
// /ping), whose answers to permission requests count; null while unknown.
export const ui = { view: null, threads: [], me: { sender: "", open: false, name: "" }, humans: null };

// DEVICE_KEY is where this browser keeps its device name (localStorage):
// the name its pairing gave it, or the one its notifications were saved
// under.
export const DEVICE_KEY = "agent-bridge-device";

// tab is the tab's one stream (stream.js), which the open thread reads too.
export const tab = {
  ctrl: null, // aborts the stream; null while not streaming
  gseq: null, // the last gseq received; null = start at the head
  from: null, // the cursor the current connection started from
  up: false, // the stream is connected
};

// sender is the viewer: the id its credential writes as (whoami), or on
// a bridge without tokens the "Post as" field.
export function sender() {
  if (ui.me.open) return $("sender").value.trim() || "user";
  return ui.me.sender || "user";
}

// contentText is an event's content as text (JSON for anything else).
export function contentText(ev) {
  return typeof ev.content === "string" ? ev.content : JSON.stringify(ev.content);
}

// threadName is the name of a thread from the list, else its id.
export function threadName(id) {
  const t = ui.threads.find((x) => x.id === id);
  return t && t.name ? t.name : id;
}

// partyRound returns meta.party of a party reply ({round, trigger}) or null.
export function partyRound(meta) {
  const p = meta && meta.party;
  return p && typeof p === "object" && (p.round === 1 || p.round === 2) && typeof p.trigger === "string" ? p : null;
}

// inThreadWords replaces a thread's id in a server sentence with its name,
// so that a refusal reads "thread “design” is paused" rather than an id.
export function inThreadWords(message, id) {
  if (!id || typeof message !== "string") return message;
  const name = threadName(id);
  return name && name !== id ? message.split(id).join(`“${name}”`) : message;
}

function profileOf(v, id) {
  const st = v.liveState || v.state;
  const inv = st && st.participants && (st.participants.invited || []).find((p) => p.id === id);
  return inv ? inv.profile || {} : null;
}

// senderLabel is a participant's display name (nickname and id) and its
// client / model, as far as the thread's state says.
export function senderLabel(v, id) {
  const p = profileOf(v, id);
  if (!p) return { name: id, detail: "" };
  const name = p.nickname ? `${p.nickname} (${id})` : id;
  const detail = [p.client, p.model].filter(Boolean).join(" / ");
  return { name, detail };
}

// notifyEnabled is whether the viewer allowed notifications.
export function notifyEnabled() {
  return "Notification" in window && Notification.permission === "granted";
}

// scrollToBottom moves the thread to its newest event and remembers where
// it put the view: the scroll event that follows is the page's own, and
// must not be read as the viewer leaving the bottom when the list has
// grown meanwhile.
export function scrollToBottom() {
  const box = $("events");
  box.scrollTop = box.scrollHeight;
  if (ui.view) ui.view.autoTop = box.scrollTop;
}

// pendingFiles is what the composer sends of the files attachments.js
// keeps in v.files: the uploaded ones as meta.attachments wants them, and
// whether one is still uploading.
export function pendingFiles(v) {
  const items = v ? v.files : [];
  return { ready: items.filter((it) => it.att).map((it) => it.att), busy: items.some((it) => !it.att && !it.error) };
}

// loadState (re)loads v's state, as of its cursor, and says so ("state"):
// the live state ({live: true}) names the participants. An answer that a
// later request or another thread overtook is dropped. It resolves once
// the subscribers have run.
export async function loadState(v) {
  const req = ++v.stateReq;
  const at = v.cursor;
  const q = at === null ? "" : `?at=${at}`;
  try {
    const res = await api.get(`/threads/${encodeURIComponent(v.id)}/state${q}`, { signal: v.ctrl.signal });
    if (v !== ui.view || req !== v.stateReq) return;
    const st = res.state || {};
    v.state = st;
    if (at === null) v.liveState = st;
    publish("state", { v, live: at === null });
  } catch (err) {
    if (v === ui.view && err.name !== "AbortError") publish("state", { v, error: err.message });
  }
}

// setCursor views v as of version n (null: live, the newest). Events after
// n are hidden, the panel shows the state at n, and everything that would
// post is disabled ("cursor"; the views follow it).
export function setCursor(v, n) {
  const h = v.last;
  if (n !== null && (n >= h || h === 0)) n = null;
  if (n !== null && n < 1) n = 1;
  const from = v.cursor === null ? h : v.cursor;
  v.cursor = n;
  publish("cursor", { v, from, to: n === null ? h : n });
  return loadState(v);
}
