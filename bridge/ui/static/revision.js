// revision.js: the revision cursor. A thread can be viewed as of any
// revision n: events after n are hidden, the panel shows the state at n
// (GET /state?at=n), and everything that would post is disabled. The
// cursor moves in shared.js (setCursor: "cursor"); this module draws the
// revision bar and disables what would post, whenever the thread, its
// panel or the cursor changes.

import { $ } from "./dom.js";
import { ui, setCursor } from "./shared.js";
import { subscribe } from "./bus.js";

const POSTING = ["message-input", "send-btn", "to-select", "rename-btn", "inv-client", "inv-model", "inv-nickname", "inv-roles", "inv-expertise", "inv-character", "inv-id", "inv-submit", "ctl-pause", "ctl-discussion", "ctl-agent-mentions", "ctl-auto", "ctl-party", "ctl-party-max", "ctl-party-cross"];

function renderRevision() {
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

subscribe("opened", renderRevision);
subscribe("changed", renderRevision);
subscribe("cursor", renderRevision);
