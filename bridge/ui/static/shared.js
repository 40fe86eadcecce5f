// shared.js: the little state the UI's modules share. The open thread's own
// state lives in its view object (thread.js); this holds the pointers to it
// and the settings every module reads.

import { $ } from "./dom.js";

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

// inThreadWords replaces a thread's id in a server sentence with its name,
// so that a refusal reads "thread “design” is paused" rather than an id.
export function inThreadWords(message, id) {
  if (!id || typeof message !== "string") return message;
  const name = threadName(id);
  return name && name !== id ? message.split(id).join(`“${name}”`) : message;
}
