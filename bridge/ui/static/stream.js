// stream.js: the tab's one stream, the global one (GET /events/stream):
// every thread's events (which keep the thread list current and feed the
// open thread), presence changes and receipts. One, and none while the tab
// is hidden unless the viewer allowed notifications: browsers allow only
// six HTTP/1.1 connections per host across all tabs, and a held stream
// occupies one. Presence and receipts are not replayed, so every
// connection reloads those of the open thread; a connection that starts at
// the head (the first, or after cursor_ahead) reloads everything, after
// the stream's start is fixed, so nothing falls between the load and the
// stream. What arrives it says on the bus ("connected", "message",
// "presence", "receipt"), for the views that follow it.

import * as api from "./api.js";
import { $ } from "./dom.js";
import { ui, tab, notifyEnabled } from "./shared.js";
import { publish } from "./bus.js";

export function setConn(status) {
  const c = $("conn-status");
  c.textContent = status;
  c.dataset.status = status.split(":")[0];
}

export function startStream() {
  if (tab.ctrl) return;
  tab.ctrl = new AbortController();
  followStream(tab.ctrl.signal);
}

// onVisibility gives the connection back while hidden, unless a hidden tab
// has notifications to raise.
export function onVisibility() {
  if (!document.hidden) return startStream();
  if (notifyEnabled() || !tab.ctrl) return;
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
      if (tab.up) publish("connected", { fresh: tab.from === null });
    },
    onMessage: (name, data) => {
      let msg;
      try {
        msg = JSON.parse(data);
      } catch {
        return;
      }
      if (!msg || typeof msg !== "object") return;
      const v = ui.view;
      if (name === "presence") return publish("presence", { p: msg });
      if (name === "receipt") return v && msg.thread === v.id && publish("receipt", { v, r: msg });
      if (name !== "message") return;
      if (typeof msg.gseq === "number") tab.gseq = msg.gseq;
      publish("message", { ev: msg });
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
