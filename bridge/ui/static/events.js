// events.js: one event as a node of the thread. Messages are Markdown
// (markdown.js), controls one sentence (controls.js), private events
// collapsed; a day's first event carries the date separator and a party
// round's replies form a group.

import { el, button, dayKey, dayLabel, timeOf, fullTime } from "./dom.js";
import { sender, contentText } from "./shared.js";
import { renderMarkdown } from "./markdown.js";
import { describeControl } from "./controls.js";
import { hooks } from "./hooks.js";

const BADGES = ["coordinator", "error", "loop-guard", "clarification", "party", "question", "permission"];

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

// partyRound returns meta.party of a party reply ({round, trigger}) or null.
function partyRound(meta) {
  const p = meta && meta.party;
  return p && typeof p === "object" && (p.round === 1 || p.round === 2) && typeof p.trigger === "string" ? p : null;
}

// notePartyReply records which round a party reply answered, so the
// trigger's receipt can say "replied in round 1" when round 2 passed.
export function notePartyReply(v, ev) {
  const p = partyRound(ev.meta);
  if (!p || ev.type !== "message") return;
  let m = v.party.get(p.trigger);
  if (!m) v.party.set(p.trigger, (m = new Map()));
  if (!m.has(ev.from)) m.set(ev.from, new Set());
  m.get(ev.from).add(p.round);
  hooks.paintReceipts(v, p.trigger);
}

// markGroups marks where a day starts (the date separator) and where a
// party round's group starts, for node and the node after it.
export function markGroups(node) {
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

export function renderEvent(v, ev) {
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

  const head = el("header", "event-head");
  const who = senderLabel(v, ev.from);
  const from = el("span", "sender", who.name);
  from.dataset.from = ev.from;
  const detail = el("span", "profile", who.detail);
  detail.dataset.from = ev.from;
  head.append(from, detail);
  if (ev.type === "message") head.append(el("span", "to", "→ " + (ev.to || "all")));
  const time = el("time", "ts", timeOf(ev.ts));
  time.dateTime = ev.ts || "";
  time.title = `${fullTime(ev.ts)} · revision ${ev.seq}`;
  head.append(time);
  for (const t of shown) head.append(el("span", "badge badge-" + t, t === "coordinator" ? "coordinator notice" : t));
  if (meta.reply_to) {
    const target = v.events.get(v.byID.get(meta.reply_to));
    head.append(button("reply-link", "↩ " + (target ? "reply to " + target.from : "reply"), () => hooks.showEvent(v, meta.reply_to), "Show the message this replies to"));
  }
  if (ev.type === "message") head.append(button("reply-btn", "Reply", () => hooks.setReply(ev)));
  // A permission request carries meta.permission; the coordinator's notice
  // that one waits no more is tagged permission too, and asks nothing.
  const request = ev.type === "message" && tags.includes("permission") && !!meta.permission;
  if (ev.type === "message" && (tags.includes("question") || request)) {
    // An agent's [USER QUESTION] or permission request waits for the
    // person it is addressed to.
    node.dataset.to = ev.to || "all";
    node.classList.add("asks");
    if (tags.includes("question") && !hooks.isFieldQuestion(ev)) head.append(button("answer-btn", "Answer", () => hooks.answerQuestion(ev), `Answer ${ev.from}'s question`));
  }
  node.append(head);

  const body = el("div", "event-body");
  if (meta.private === true) {
    // Private to its sender (an actor's thinking or journal): shown to
    // people, collapsed, and never sent to another participant.
    node.classList.add("private");
    const d = el("details", "private");
    d.append(el("summary", "", `private ${ev.type} of ${ev.from}`));
    d.append(renderMarkdown(contentText(ev)));
    body.append(d);
  } else if (ev.type === "message") body.append(renderMarkdown(contentText(ev)));
  else if (ev.type === "scene.closed") body.textContent = `the scene closed (${contentText(ev)})`;
  else if (ev.type === "control") body.textContent = describeControl(ev.content, controlContext(v));
  else if (ev.type === "thread.created") body.textContent = `created the thread “${contentText(ev)}”`;
  else if (ev.type === "thread.renamed") body.textContent = `renamed the thread to “${contentText(ev)}”`;
  else body.textContent = `${ev.type}: ${contentText(ev)}`;
  node.append(body);
  if (request) {
    node.append(permissionBox(ev));
    const answer = v.permissionAnswers.get(ev.id);
    if (answer) markAnswered(v, node, ev, answer);
  }
  if (hooks.isFieldQuestion(ev)) node.append(hooks.questionBox(v, ev));
  if (node.classList.contains("asks")) markForViewer(node);
  if (ev.type === "message" || ev.type === "control") {
    const box = el("div", "receipts");
    box.hidden = true;
    node.append(box);
    if (ev.id) hooks.paintReceipts(v, ev.id, box);
  }
  return node;
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

// permissionBox shows what an agent asks to do (meta.permission) and, for
// the person it is addressed to, one button per option; a click answers
// with the permission control, as the viewer.
function permissionBox(ev) {
  const p = (ev.meta && ev.meta.permission) || {};
  const box = el("div", "permission");
  const call = p.tool_call || {};
  const what = [call.title, call.kind ? `(${call.kind})` : ""].filter(Boolean).join(" ");
  if (what) box.append(el("div", "permission-call", what));
  const row = el("div", "permission-options");
  for (const o of Array.isArray(p.options) ? p.options : []) {
    if (!o || typeof o.id !== "string") continue;
    const b = button("permission-option kind-" + String(o.kind || "").replace(/[^a-z_]/g, ""), String(o.name || o.id), () => {
      hooks.control({ permission: { event: ev.id, option: o.id } });
    });
    b.dataset.option = o.id;
    row.append(b);
  }
  box.append(row);
  return box;
}

// notePermissionAnswer marks the request a permission control answers, or
// the coordinator's notice that it waits no more (no answer in time, or
// its run stopped) closes: its buttons give way to who chose what, or to
// the notice, so nobody answers twice or answers what nothing reads.
export function notePermissionAnswer(v, ev) {
  const answer = permissionAnswerOf(ev);
  if (!answer) return;
  v.permissionAnswers.set(answer.event, answer);
  const node = v.nodes.get(v.byID.get(answer.event));
  const req = v.events.get(v.byID.get(answer.event));
  if (node && req) markAnswered(v, node, req, answer);
}

// permissionAnswerOf is what ev says of a permission request: {event,
// from, option} for a permission control, {event, from, closed} for the
// coordinator's closing notice (a coordinator permission message that
// replies to another and carries no request of its own), else null.
function permissionAnswerOf(ev) {
  const meta = ev.meta || {};
  if (ev.type === "message") {
    const tags = Array.isArray(meta.tags) ? meta.tags : [];
    if (!tags.includes("permission") || !tags.includes("coordinator") || meta.permission || typeof meta.reply_to !== "string") return null;
    return { event: meta.reply_to, from: ev.from, closed: contentText(ev) };
  }
  if (ev.type !== "control") return null;
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
  return { event: p.event, from: ev.from, option: String(p.option || "") };
}

function markAnswered(v, node, req, answer) {
  node.classList.add("answered");
  const box = node.querySelector(".permission");
  if (!box) return;
  let line = box.querySelector(".permission-answer");
  if (!line) box.append((line = el("div", "permission-answer")));
  if (answer.closed !== undefined) {
    line.textContent = `No longer waiting: ${answer.closed}`;
    return;
  }
  const name = controlContext(v).option(req.id, answer.option) || answer.option;
  line.textContent = `${senderLabel(v, answer.from).name} chose ${name}`;
}

// markForViewer highlights a question or permission request addressed to
// the viewer (the "Post as" id): only they get its buttons.
export function markForViewer(node) {
  node.classList.toggle("question-for-me", node.dataset.to === sender());
}

export function markQuestions() {
  for (const node of document.querySelectorAll("#event-list .event.asks")) markForViewer(node);
}

// refreshSenderLabels updates names and profiles once the participant list
// is known, touching only the label nodes, and redraws the receipts and
// control sentences, which name participants too.
export function refreshSenderLabels(v) {
  for (const span of document.querySelectorAll("#event-list .sender, #event-list .profile")) {
    const who = senderLabel(v, span.dataset.from);
    const text = span.classList.contains("sender") ? who.name : who.detail;
    if (span.textContent !== text) span.textContent = text;
  }
  for (const id of v.receipts.keys()) hooks.paintReceipts(v, id);
  const ctx = controlContext(v);
  for (const node of document.querySelectorAll("#event-list .event.type-control")) {
    const ev = v.events.get(Number(node.dataset.seq));
    const body = node.querySelector(".event-body");
    if (!ev || !body) continue;
    const text = describeControl(ev.content, ctx);
    if (body.textContent !== text) body.textContent = text;
  }
}
