// shared.js: the little state the UI's modules share. The open thread's own
// state lives in its view object (thread.js); this holds the pointers to it
// and the settings every module reads.

import { $ } from "./dom.js";

// ui.view is the open thread (thread.js newView), null when none is open.
// ui.threads is the thread list (threadlist.js).
export const ui = { view: null, threads: [] };

// tab is the tab's one stream (stream.js), which the open thread reads too.
export const tab = {
  ctrl: null, // aborts the stream; null while not streaming
  gseq: null, // the last gseq received; null = start at the head
  from: null, // the cursor the current connection started from
  up: false, // the stream is connected
};

// sender is the viewer: the "Post as" id.
export function sender() {
  return $("sender").value.trim() || "user";
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
