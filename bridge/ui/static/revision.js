// revision.js: the revision cursor. A thread can be viewed as of any
// revision n: events after n are hidden, the panel shows the state at n
// (GET /state?at=n), and everything that would post is disabled.

import { $ } from "./dom.js";
import { ui } from "./shared.js";
import { hooks } from "./hooks.js";

export function setCursor(v, n) {
  const h = v.last;
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
      for (let i = 0; i < 1000 && v === ui.view && v.cursor !== null && v.cursor < v.first && v.first > 1; i++) await hooks.loadOlder(v);
    })();
  }
  renderRevision();
  hooks.refreshState(v);
  const node = v.nodes.get(now);
  if (node && n !== null) node.scrollIntoView({ block: "nearest" });
  else if (n === null) {
    v.stick = true;
    hooks.scrollToBottom();
  }
}

const POSTING = ["message-input", "send-btn", "to-select", "rename-btn", "inv-client", "inv-model", "inv-nickname", "inv-roles", "inv-expertise", "inv-character", "inv-id", "inv-submit", "ctl-pause", "ctl-discussion", "ctl-agent-mentions", "ctl-auto", "ctl-party", "ctl-party-max", "ctl-party-cross"];

export function renderRevision() {
  const v = ui.view;
  if (!v) return;
  const h = v.last;
  const at = v.cursor === null ? h : v.cursor;
  $("rev-label").textContent = h ? `${at} / ${h}` : "";
  $("rev-back").disabled = at <= 1;
  $("rev-open").disabled = h <= 1 || v.cursor !== null;
  $("rev-forward").disabled = v.cursor === null;
  const past = v.cursor !== null;
  $("revision-banner").hidden = !past;
  if (past) $("revision-text").textContent = `Viewing version ${v.cursor} of ${h}`;
  document.body.classList.toggle("viewing-past", past);
  for (const id of POSTING) $(id).disabled = past;
  for (const b of document.querySelectorAll("#participant-list button")) b.disabled = past;
  // The permission buttons only change when the view moves in or out of
  // the past: looking them up per event would cost a burst dearly.
  if (past !== shownPast) {
    shownPast = past;
    for (const b of document.querySelectorAll("#event-list .permission-option")) b.disabled = past;
  }
}

let shownPast = false;

// wireRevision connects the thread menu's "Earlier versions" and the
// banner's back, forward and live buttons.
export function wireRevision() {
  const back = () => ui.view && setCursor(ui.view, (ui.view.cursor === null ? ui.view.last : ui.view.cursor) - 1);
  $("rev-open").addEventListener("click", back);
  $("rev-back").addEventListener("click", back);
  $("rev-forward").addEventListener("click", () => ui.view && ui.view.cursor !== null && setCursor(ui.view, ui.view.cursor + 1));
  $("jump-live").addEventListener("click", () => ui.view && setCursor(ui.view, null));
}
