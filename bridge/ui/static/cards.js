// cards.js: an ACP agent's permission request (contract 6.6) as a card a
// person answers with one tap. The card says in a sentence what the agent
// wants, shows the command (or file, or tool) in a code block and offers
// each option as a full-width button; the ids, the request's own text and
// the command line that answers it from a terminal fold away under
// "Details". Once answered, the card says how: the first answer that took
// effect, or the coordinator's notice that the request waits no more,
// whichever came first — later answers change nothing, so they change
// nothing here either, after a reload and in every browser alike. The
// card is a part of the request's event (events.js asks for it: "parts");
// a tap posts the answer through the panel ("control").

import { el, button } from "./dom.js";
import { ui, contentText, threadName, senderLabel } from "./shared.js";
import { renderMarkdown } from "./markdown.js";
import { publish, subscribe } from "./bus.js";

// WANTS says what an agent asks to do, per ACP tool kind.
const WANTS = {
  execute: "wants to run this command",
  edit: "wants to change this file",
  delete: "wants to delete this",
  move: "wants to move this",
  read: "wants to read this",
  search: "wants to search for this",
  fetch: "wants to fetch this",
  think: "wants to think it over",
  switch_mode: "wants to switch its mode",
};

// CHOSE words an answer by the option's kind.
const CHOSE = {
  allow_once: "Allowed once",
  allow_always: "Always allowed",
  reject_once: "Rejected",
  reject_always: "Always rejected",
};

function requestOf(ev) {
  const p = ev.meta && ev.meta.permission;
  return p && typeof p === "object" ? p : {};
}

function optionsOf(ev) {
  const opts = requestOf(ev).options;
  return Array.isArray(opts) ? opts.filter((o) => o && typeof o.id === "string") : [];
}

// asker is the agent that asks: the coordinator posts the request for it
// and names it in meta.participant.
function asker(v, ev) {
  const p = ev.meta && ev.meta.participant;
  const id = typeof p === "string" && p ? p : ev.from;
  return senderLabel(v, id).name;
}

// permissionAsk is the request's sentence, the event's body: who wants
// to do what.
function permissionAsk(v, ev) {
  const call = requestOf(ev).tool_call || {};
  const wants = WANTS[call.kind] || "wants to use a tool";
  return el("p", "ask-line", `${asker(v, ev)} ${wants}${call.title ? ":" : "."}`);
}

// shellWord quotes s for a POSIX shell when it needs it.
function shellWord(s) {
  return /^[A-Za-z0-9._@:/-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

// permissionCard is the request's card, for node: the tool call in a
// code block, one button per option (shown to the person it is addressed
// to), the details, and the answer once there is one.
function permissionCard(v, ev, node) {
  const call = requestOf(ev).tool_call || {};
  const box = el("div", "permission");
  if (call.title) {
    const pre = el("pre", "permission-call");
    pre.append(el("code", "", String(call.title)));
    box.append(pre);
  }
  const row = el("div", "permission-options card-actions");
  for (const o of optionsOf(ev)) {
    const kind = String(o.kind || "").replace(/[^a-z_]/g, "");
    const primary = kind.startsWith("allow") ? " btn-primary" : "";
    const b = button(`permission-option btn-block kind-${kind}${primary}`, String(o.name || o.id), () => {
      publish("control", { content: { permission: { event: ev.id, option: o.id } } });
    });
    b.dataset.option = o.id;
    row.append(b);
  }
  box.append(row, details(v, ev, call));
  const answer = v.permissionAnswers.get(ev.id);
  if (answer) markAnswered(v, node, ev, answer, box);
  return box;
}

// details holds what a person rarely needs: the tool's kind, each option's
// id, the command line that answers from a terminal, the request's own
// text and its id.
function details(v, ev, call) {
  const d = el("details", "more");
  d.append(el("summary", "", "Details"));
  if (call.kind) d.append(el("p", "", `Kind of tool call: ${call.kind}`));
  const opts = optionsOf(ev);
  if (opts.length) {
    d.append(el("p", "", "From a terminal:"));
    // Written when the fold opens: the thread's name may not be known
    // yet when the card is drawn.
    const code = el("code");
    const write = () => (code.textContent = `agent-bridge permit ${shellWord(threadName(v.id))} ${ev.seq} ${shellWord(opts[0].id)}`);
    write();
    d.addEventListener("toggle", write);
    const pre = el("pre");
    pre.append(code);
    d.append(pre);
    d.append(el("p", "", "Options: " + opts.map((o) => `${o.id} (${o.name || o.id})`).join(", ")));
  }
  d.append(el("p", "", "The request as the coordinator wrote it:"));
  d.append(renderMarkdown(contentText(ev)));
  d.append(el("p", "meta", `Request ${ev.id}, version ${ev.seq}`));
  return d;
}

// notePermissionAnswer records what ev says of a permission request (a
// person's answer, or the coordinator's notice that it waits no more) when
// it is the first to: of two answers, the bridge acts on the earlier and
// refuses the later (already_answered), and the coordinator reads no
// answer after its notice. Events arrive out of order (an older page loads
// after newer ones), so the earliest by seq wins, not the first seen.
function notePermissionAnswer(v, ev) {
  const answer = permissionAnswerOf(ev);
  if (!answer) return;
  const old = v.permissionAnswers.get(answer.event);
  if (old && old.seq < answer.seq) return;
  v.permissionAnswers.set(answer.event, answer);
  const node = v.nodes.get(v.byID.get(answer.event));
  const req = v.events.get(v.byID.get(answer.event));
  if (node && req) markAnswered(v, node, req, answer);
}

// permissionAnswerOf is what ev says of a permission request: {event,
// from, option, seq} for a human's permission control, {event, from,
// closed, seq} for the coordinator's closing notice (a coordinator
// permission message that replies to another and carries no request of
// its own), else null. An answer from someone who is not one of the
// bridge's humans counts for nothing (contract 7.3).
function permissionAnswerOf(ev) {
  const meta = ev.meta || {};
  if (ev.type === "message") {
    const tags = Array.isArray(meta.tags) ? meta.tags : [];
    if (!tags.includes("permission") || !tags.includes("coordinator") || meta.permission || typeof meta.reply_to !== "string") return null;
    return { event: meta.reply_to, from: ev.from, closed: contentText(ev), seq: ev.seq };
  }
  if (ev.type !== "control" || (ui.humans && !ui.humans.includes(ev.from))) return null;
  let c = ev.content;
  if (typeof c === "string") {
    try {
      c = JSON.parse(c);
    } catch {
      return null;
    }
  }
  const p = c && typeof c === "object" ? c.permission : null;
  if (!p || typeof p.event !== "string") return null;
  return { event: p.event, from: ev.from, option: String(p.option || ""), seq: ev.seq };
}

// answerText says how a request was answered: "Rejected by user".
function answerText(v, req, answer) {
  if (answer.closed !== undefined) return `No longer waiting: ${answer.closed}`;
  const o = optionsOf(req).find((x) => x.id === answer.option);
  const who = senderLabel(v, answer.from).name;
  const chose = o && CHOSE[o.kind];
  if (chose) return `${chose} by ${who} (“${o.name || o.id}”)`;
  return `${who} chose “${(o && o.name) || answer.option}”`;
}

// markAnswered says how the request of node was answered, in its card
// (box, which may not be in node yet).
function markAnswered(v, node, req, answer, box = node.querySelector(".permission")) {
  node.classList.add("answered");
  if (!box) return;
  let line = box.querySelector(".permission-answer");
  if (!line) box.querySelector(".permission-options").after((line = el("p", "permission-answer")));
  line.textContent = answerText(v, req, answer);
}

// repaintAnswers redraws each answered request's sentence once the
// participants' names are known.
function repaintAnswers(v) {
  for (const [id, answer] of v.permissionAnswers) {
    const node = v.nodes.get(v.byID.get(id));
    const req = v.events.get(v.byID.get(id));
    if (node && req) markAnswered(v, node, req, answer);
  }
}

subscribe("parts", (d) => {
  const { v, ev, node } = d;
  const tags = ev.meta && Array.isArray(ev.meta.tags) ? ev.meta.tags : [];
  if (ev.type !== "message" || !tags.includes("permission") || !ev.meta.permission) return;
  d.ask = permissionAsk(v, ev);
  d.card = permissionCard(v, ev, node);
});
subscribe("added", ({ v, ev }) => notePermissionAnswer(v, ev));
subscribe("state", ({ v, live }) => live && repaintAnswers(v));
