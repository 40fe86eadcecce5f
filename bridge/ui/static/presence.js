// presence.js: who is there. Presence is loaded when a thread opens and
// then follows the stream's "event: presence" changes; it goes stale after
// the server's TTL by the page's own clock (corrected by the server's, as
// seen in the last change), with nothing polled. An agent the running
// coordinator can start and that is not running is reported by the
// coordinator with details.available (docs/api.md) and shown "available".
// It draws into the participants the panel lists ("panel-drawn") and says
// when it drew ("presence-drawn": the receipts show a running agent's
// status too).

import * as api from "./api.js";
import { $ } from "./dom.js";
import { ui, senderLabel } from "./shared.js";
import { publish, subscribe } from "./bus.js";

let presenceTTL = 120000;
let clockSkew = 0; // local clock - server clock
// presenceReq counts presence loads and changes; an entry's streamed says
// after which load it arrived.
let presenceReq = 0;

async function loadPresence(v) {
  const asked = ++presenceReq;
  try {
    const res = await api.get(`/threads/${encodeURIComponent(v.id)}/presence`, { signal: v.ctrl.signal });
    if (v !== ui.view) return;
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

// shownState is the word a participant's presence shows.
function shownState(p) {
  if (!p || p.stale) return "offline";
  const d = p.details;
  if ((p.state === "listening" || p.state === "idle") && d && d.available === true) return "available";
  return p.state;
}

function renderPresence(v) {
  markStale(v);
  publish("presence-drawn", { v });
  for (const dot of $("participant-list").querySelectorAll(".presence")) {
    const p = v.presence.get(dot.dataset.id);
    const state = shownState(p);
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
    // Where the agent runs (contract 7.1): the host its coordinator
    // reports, while it is not offline.
    const host = state !== "offline" && p && p.details && typeof p.details.host === "string" ? "@ " + p.details.host : "";
    const hostEl = li.querySelector(".p-host");
    if (hostEl && hostEl.textContent !== host) hostEl.textContent = host;
    li.querySelector("button.stop").hidden = state !== "thinking";
  }
  renderThreadStatus(v);
}

// names joins display names as a sentence does: "a", "a and b", "a, b and c".
function names(list) {
  return list.length <= 1 ? list.join("") : list.slice(0, -1).join(", ") + " and " + list[list.length - 1];
}

// renderThreadStatus is the line under the thread's name in the header:
// the modes that change who answers, and who is at work (or who is there).
function renderThreadStatus(v) {
  const st = v.state || {};
  const invited = (st.participants && st.participants.invited) || [];
  const parts = [];
  if (st.paused) parts.push("paused");
  if (st.party && st.party.on) parts.push("party mode");
  if (st.scene && st.scene.on) parts.push("scene running");
  const label = (id) => senderLabel(v, id).name;
  const thinking = invited.filter((p) => shownState(v.presence.get(p.id)) === "thinking").map((p) => label(p.id));
  if (thinking.length) parts.push(`${names(thinking)} ${thinking.length === 1 ? "is" : "are"} thinking…`);
  else if (invited.length === 0) parts.push("no agents invited yet");
  else if (invited.length <= 3) parts.push("with " + names(invited.map((p) => label(p.id))));
  else parts.push(`${invited.length} participants`);
  const text = v.cursor === null ? parts.join(" · ") : `as of version ${v.cursor}`;
  if ($("thread-status").textContent !== text) $("thread-status").textContent = text;
}

subscribe("ready", ({ v, older }) => !older && loadPresence(v));
subscribe("connected", ({ fresh }) => !fresh && ui.view && loadPresence(ui.view));
subscribe("presence", ({ p }) => onPresence(ui.view, p));
subscribe("panel-drawn", ({ v }) => renderPresence(v));
subscribe("tick", ({ v }) => markStale(v) && renderPresence(v));
