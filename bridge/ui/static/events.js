// events.js: one event as a node of the thread, drawn when thread.js asks
// ("draw"). Messages are Markdown (markdown.js), controls one sentence
// (controls.js), private events collapsed; a day's first event carries the
// date separator and a party round's replies form a group. The parts other
// modules own (a permission request's card, a question's form, a change's
// card, the files, the receipts) they add when asked ("parts"), and events.js
// lays them out.

import { el, button, icon, dayKey, dayLabel, timeOf, fullTime } from "./dom.js";
import { sender, contentText, senderLabel, partyRound } from "./shared.js";
import { renderMarkdown } from "./markdown.js";
import { describeControl } from "./controls.js";
import { publish, subscribe } from "./bus.js";

const BADGES = ["coordinator", "error", "loop-guard", "clarification", "party", "question", "permission"];

// QUESTION_MARK is the directive that made a reply a question (contract
// 5.2): the card says "asks you:" instead.
const QUESTION_MARK = /^[ \t]*\[USER QUESTION\]:[ \t]*/m;

// markGroups marks where a day starts (the date separator) and where a
// party round's group starts, for node and the node after it.
function markGroups(node) {
  for (const n of [node, node.nextElementSibling]) {
    if (!n) continue;
    const prev = n.previousElementSibling;
    n.classList.toggle("day-start", !prev || prev.dataset.day !== n.dataset.day);
    if (n.dataset.partyGroup) n.classList.toggle("party-start", !prev || prev.dataset.partyGroup !== n.dataset.partyGroup);
  }
}

// isNotice is whether an event is the coordinator's own notice (its badge)
// rather than an agent's reply that the coordinator posted for it.
const isNotice = (ev, tags) => tags.includes("coordinator") && (!ev.meta || !ev.meta.via || ev.meta.via === ev.from);

function renderEvent(v, ev) {
  const meta = ev.meta || {};
  const tags = Array.isArray(meta.tags) ? meta.tags : [];
  const node = el("article", "event type-" + String(ev.type).replace(/[^a-z0-9_-]/g, "-"));
  node.dataset.seq = ev.seq;
  if (ev.id) node.dataset.id = ev.id;
  node.dataset.day = dayKey(ev.ts);
  node.dataset.dayLabel = dayLabel(ev.ts);
  const shown = tags.filter((t) => BADGES.includes(t) && (t !== "coordinator" || isNotice(ev, tags)));
  for (const t of shown) node.classList.add("tag-" + t);
  const party = partyRound(meta);
  if (party) {
    node.classList.add("party-reply", "party-round-" + party.round);
    node.dataset.partyGroup = `${party.trigger}:${party.round}`;
    node.dataset.partyTitle = party.round === 1 ? "Party · round 1 — first takes" : "Party · round 2 — reactions";
  }

  // A permission request or question is a card that speaks for itself:
  // the coordinator's "notice" badge would only add noise to it.
  const asks = ev.type === "message" && (tags.includes("question") || (tags.includes("permission") && !!meta.permission));
  // The coordinator posts a permission request for the agent that asks
  // (meta.participant): the card is that agent's.
  const author = asks && typeof meta.participant === "string" && /^[A-Za-z0-9][A-Za-z0-9._@:-]*$/.test(meta.participant) ? meta.participant : ev.from;
  const head = el("header", "event-head");
  const whoBox = el("span", "who");
  const who = senderLabel(v, author);
  const from = el("span", "sender", who.name);
  from.dataset.from = author;
  const detail = el("span", "profile", who.detail);
  detail.dataset.from = author;
  whoBox.append(from, detail);
  if (ev.type === "message") whoBox.append(el("span", "to", "→ " + (ev.to || "all")));
  for (const t of shown) if (!(asks && t === "coordinator")) whoBox.append(el("span", "badge badge-" + t, t === "coordinator" ? "notice" : t));
  const time = el("time", "ts", timeOf(ev.ts));
  time.dateTime = ev.ts || "";
  time.title = `${fullTime(ev.ts)} · version ${ev.seq}`;
  head.append(whoBox, time);
  if (ev.type === "message") {
    const reply = button("reply-btn btn-quiet btn-icon", "", () => publish("reply", { ev }));
    reply.append(icon("reply"));
    reply.setAttribute("aria-label", "Reply");
    reply.title = "Reply to this message";
    head.append(reply);
  }
  node.append(head);
  if (meta.reply_to) node.append(replyQuote(v, meta.reply_to));

  // A permission request carries meta.permission; the coordinator's notice
  // that one waits no more is tagged permission too, and asks nothing.
  const request = ev.type === "message" && tags.includes("permission") && !!meta.permission;
  const question = ev.type === "message" && tags.includes("question");
  // The other modules' parts: the request's sentence and card (cards.js),
  // a question with fields' words and form (questionform.js: such a
  // question is answered with its form, not with a reply), the change's
  // card (changes.js), the files (attachments.js).
  const parts = { v, ev, node, ask: null, card: null, form: null, change: null, files: null };
  publish("parts", parts);
  const body = el("div", "event-body");
  if (meta.private === true) {
    // Private to its sender (an actor's thinking or journal): shown to
    // people, collapsed, and never sent to another participant.
    node.classList.add("private");
    const d = el("details", "private");
    d.append(el("summary", "", `private ${ev.type} of ${ev.from}`));
    d.append(renderMarkdown(contentText(ev)));
    body.append(d);
  } else if (parts.ask) body.append(parts.ask);
  else if (question) body.append(renderMarkdown(contentText(ev).replace(QUESTION_MARK, "")));
  else if (ev.type === "message") body.append(renderMarkdown(contentText(ev)));
  else if (ev.type === "scene.closed") body.textContent = `the scene closed (${contentText(ev)})`;
  else if (ev.type === "control") body.textContent = describeControl(ev.content, controlContext(v));
  else if (ev.type === "thread.created") body.textContent = `created the thread “${contentText(ev)}”`;
  else if (ev.type === "thread.renamed") body.textContent = `renamed the thread to “${contentText(ev)}”`;
  else body.textContent = `${ev.type}: ${contentText(ev)}`;
  if (question) body.prepend(el("p", "ask-line", `${senderLabel(v, author).name} asks you:`));
  node.append(body);
  if (parts.files && meta.private !== true) node.append(parts.files);
  if (parts.change) node.append(parts.change);
  if (request || question) {
    // An agent's [USER QUESTION] or permission request waits for the
    // person it is addressed to.
    node.dataset.to = ev.to || "all";
    node.classList.add("asks");
  }
  if (parts.card) node.append(parts.card);
  if (parts.form) node.append(parts.form);
  else if (question) {
    node.append(button("answer-btn btn-primary btn-block", "Answer", () => publish("answer", { ev }), `Answer ${ev.from}'s question`));
  }
  if (node.classList.contains("asks")) markForViewer(node);
  if (ev.type === "message" || ev.type === "control") {
    const box = el("div", "receipts");
    box.hidden = true;
    node.append(box);
  }
  return node;
}

// replyQuote is the message an event answers, quoted by its sender and
// first line; a tap shows it (thread.js follows the link). Until that
// message is loaded it says so.
function replyQuote(v, id) {
  const b = el("button", "reply-link");
  b.type = "button";
  b.title = "Show the message this replies to";
  b.dataset.replyTo = id;
  paintQuote(v, b);
  return b;
}

// paintQuotes redraws the quotes of ev: it may be loaded after the
// messages that answer it (an older page).
function paintQuotes(v, ev) {
  if (!ev.id) return;
  for (const b of document.querySelectorAll(`#event-list .reply-link[data-reply-to="${CSS.escape(ev.id)}"]`)) paintQuote(v, b);
}

function paintQuote(v, b) {
  const target = v.events.get(v.byID.get(b.dataset.replyTo));
  const text = target ? `↩ ${senderLabel(v, target.from).name}: ${firstLine(target)}` : "↩ an earlier message";
  // In a span of its own: a line too long for the button ends in "…".
  if (b.textContent !== text) b.replaceChildren(el("span", "", text));
}

// firstLine is an event's first line of text, without Markdown marks.
function firstLine(ev) {
  const line = contentText(ev).split("\n").find((l) => l.trim()) || "";
  return line.replace(/[*_`#>]/g, "").trim().slice(0, 120);
}

// controlContext names participants and permission options for sentences.
function controlContext(v) {
  return {
    name: (id) => senderLabel(v, id).name,
    option: (eventID, optionID) => {
      const q = v.events.get(v.byID.get(eventID));
      const opts = q && q.meta && q.meta.permission && Array.isArray(q.meta.permission.options) ? q.meta.permission.options : [];
      const o = opts.find((x) => x && x.id === optionID);
      return o && typeof o.name === "string" ? `“${o.name}”` : "";
    },
  };
}

// markForViewer highlights a question or permission request addressed to
// the viewer (sender()): only they get its buttons.
function markForViewer(node) {
  node.classList.toggle("question-for-me", node.dataset.to === sender());
}

export function markQuestions() {
  for (const node of document.querySelectorAll("#event-list .event.asks")) markForViewer(node);
}

// refreshSenderLabels updates names and profiles once the participant list
// is known, touching only the label nodes, and redraws the quotes and the
// control sentences, which name participants too (the receipts and the
// answers to requests follow "state" themselves).
function refreshSenderLabels(v) {
  for (const span of document.querySelectorAll("#event-list .sender, #event-list .profile")) {
    const who = senderLabel(v, span.dataset.from);
    const text = span.classList.contains("sender") ? who.name : who.detail;
    if (span.textContent !== text) span.textContent = text;
  }
  for (const b of document.querySelectorAll("#event-list .reply-link")) paintQuote(v, b);
  const ctx = controlContext(v);
  for (const node of document.querySelectorAll("#event-list .event.type-control")) {
    const ev = v.events.get(Number(node.dataset.seq));
    const body = node.querySelector(".event-body");
    if (!ev || !body) continue;
    const text = describeControl(ev.content, ctx);
    if (body.textContent !== text) body.textContent = text;
  }
}

subscribe("draw", (d) => (d.node = renderEvent(d.v, d.ev)));
subscribe("added", ({ v, ev, node }) => {
  markGroups(node);
  paintQuotes(v, ev);
});
subscribe("state", ({ v, live }) => live && refreshSenderLabels(v));
