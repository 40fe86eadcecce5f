// receipts.js: under each addressed message, one line per participant the
// coordinator considered, saying what became of it (docs/runs.md). The
// lines are built from the receipts (GET /threads/{id}/receipts, then
// "event: receipt" on the stream) and the participants' presence, whose
// details.status says what a running agent is doing. A line whose run the
// coordinator recorded links to that run on the runs dashboard. A line
// whose participant replied is a link to the reply (thread.js follows it).
// Receipts are loaded when the open thread is ready ("ready") and on each
// new connection of the stream, and drawn as events are added and names
// and presence change.

import * as api from "./api.js";
import { el } from "./dom.js";
import { ui, senderLabel, partyRound } from "./shared.js";
import { subscribe } from "./bus.js";

const ENDED = {
  succeeded: "replied",
  passed: "passed",
  failed: "failed",
  timeout: "timed out",
  cancelled: "cancelled",
  refused: "reply refused (muted or paused meanwhile)",
  interrupted: "interrupted",
};

// reasonOf is a receipt's reason, without the state it may repeat (an
// older bridge wrote "interrupted: laptop offline" under "interrupted").
function reasonOf(r) {
  let reason = typeof r.reason === "string" ? r.reason.trim() : "";
  if (reason.startsWith(r.state + ":")) reason = reason.slice(r.state.length + 1).trim();
  return reason;
}

// receiptText is one line's text, without the participant's name: the
// state in words and, when the coordinator or the bridge gave one, its
// reason ("queued — waiting for a coordinator serving claude"). now is
// Date.now(); presence is the participant's presence entry, if any;
// rounds the party rounds (1, 2) the participant replied in for this
// trigger, if any.
function receiptText(r, presence, now, rounds) {
  const text = stateText(r, presence, now, rounds);
  const reason = reasonOf(r);
  return reason ? `${text} — ${reason}` : text;
}

function stateText(r, presence, now, rounds) {
  let text;
  switch (r.state) {
    case "queued":
      return "queued";
    case "running": {
      const started = Date.parse(r.updated_at);
      text = "running";
      if (!isNaN(started)) text += ` ${Math.max(0, Math.round((now - started) / 1000))} s`;
      const d = presence && !presence.stale && presence.state === "thinking" && presence.details;
      if (d && typeof d.status === "string" && d.status) text += " · " + d.status;
      break;
    }
    case "skipped":
      return "not invoked";
    default:
      text = ENDED[r.state] || r.state;
  }
  // A party trigger keeps one receipt per participant, the last round's:
  // say what the earlier round brought.
  const rs = rounds ? Array.from(rounds).sort() : [];
  if (rs.length === 2 && r.state === "succeeded") return "replied in rounds 1 and 2";
  if (rs.length && r.state !== "succeeded") return `replied in round ${rs.join(" and ")}, then ${text}`;
  return text;
}

// drawReceipts fills box (a message's receipt area) with one line per
// receipt of byParticipant (a Map), sorted by participant. label(id) gives
// a participant's display name; runURL(r) is the link to a receipt's run
// ("" for none); rounds(id) a participant's party rounds.
function drawReceipts(box, byParticipant, presence, { label, runURL, rounds }, now) {
  const list = byParticipant ? Array.from(byParticipant.values()) : [];
  list.sort((a, b) => (a.participant < b.participant ? -1 : a.participant > b.participant ? 1 : 0));
  box.hidden = list.length === 0;
  const lines = [];
  for (const r of list) {
    const line = el("div", "receipt receipt-" + String(r.state).replace(/[^a-z]/g, ""));
    line.dataset.participant = r.participant;
    line.dataset.state = r.state;
    const text = `${label(r.participant)}: ${receiptText(r, presence.get(r.participant), now, rounds(r.participant))}`;
    if (r.reply) {
      const a = el("button", "receipt-link", text);
      a.type = "button";
      a.title = "Show the " + (r.state === "succeeded" ? "reply" : "notice");
      a.dataset.reply = r.reply;
      line.append(a);
    } else {
      line.append(el("span", "receipt-text", text));
    }
    const url = runURL(r);
    if (url) {
      const a = el("a", "run-link", `run #${r.invocation}`);
      a.href = url;
      a.target = "_blank";
      a.rel = "noopener";
      a.title = "This run on the coordinator's runs dashboard";
      line.append(" ", a);
    }
    lines.push(line);
  }
  box.replaceChildren(...lines);
}

// loadReceipts (re)loads the receipts of the events shown: those from the
// first loaded event on (event ids sort in append order).
async function loadReceipts(v) {
  const first = v.events.get(v.first);
  const from = first && first.id ? `?from_event=${encodeURIComponent(first.id)}` : "";
  try {
    const res = await api.get(`/threads/${encodeURIComponent(v.id)}/receipts${from}`, { signal: v.ctrl.signal });
    if (v !== ui.view) return;
    v.receipts = new Map();
    for (const r of res.receipts || []) putReceipt(v, r);
    paintAllReceipts(v);
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
function paintReceipts(v, eventID) {
  const node = v.nodes.get(v.byID.get(eventID));
  const box = node && node.querySelector(".receipts");
  if (!box) return;
  const party = v.party.get(eventID);
  drawReceipts(box, v.receipts.get(eventID), v.presence, {
    label: (id) => senderLabel(v, id).name,
    runURL: (r) => {
      // The coordinator that reported the receipt ran it (contract 7.1).
      const base = (ui.coordinatorURLs && ui.coordinatorURLs.get(r.from)) || ui.coordinatorURL;
      return base && /^\d+$/.test(String(r.invocation || "")) ? `${base}/?run=${r.invocation}` : "";
    },
    rounds: (id) => (party ? party.get(id) : null),
  }, Date.now());
}

// paintRunning redraws the receipts that count running seconds.
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

// notePartyReply records which round a party reply answered, so the
// trigger's receipt can say "replied in round 1" when round 2 passed.
function notePartyReply(v, ev) {
  const p = partyRound(ev.meta);
  if (!p || ev.type !== "message") return;
  let m = v.party.get(p.trigger);
  if (!m) v.party.set(p.trigger, (m = new Map()));
  if (!m.has(ev.from)) m.set(ev.from, new Set());
  m.get(ev.from).add(p.round);
  paintReceipts(v, p.trigger);
}

// paintAllReceipts redraws every receipt line of v (app.js too, once it
// knows where the runs are).
export function paintAllReceipts(v) {
  for (const id of v.receipts.keys()) paintReceipts(v, id);
}

subscribe("ready", ({ v }) => loadReceipts(v));
subscribe("connected", ({ fresh }) => !fresh && ui.view && loadReceipts(ui.view));
subscribe("receipt", ({ v, r }) => onReceipt(v, r));
subscribe("added", ({ v, ev }) => {
  notePartyReply(v, ev);
  if (ev.id) paintReceipts(v, ev.id);
});
subscribe("state", ({ v, live }) => live && paintAllReceipts(v));
subscribe("presence-drawn", ({ v }) => paintRunning(v));
subscribe("tick", ({ v }) => paintRunning(v));
