// questionform.js: an ACP agent's question with fields (meta.question,
// contract 8.4) as a card on its message, in the permission request's
// style (cards.js): the agent's words, then a form for the person it asks,
// one field each, "Send answer" and "Decline" as full-width buttons, and
// the command line and ids under "Details". "Send answer" posts the answer
// control ({answer: {event, fields}}) with each value of its field's type,
// "Decline" posts {answer: {event, action: "decline"}}; the bridge checks
// the values against the fields, and its sentence, naming the field, shows
// under the form with that field marked. Once the question is answered,
// declined, or withdrawn (the coordinator's notice replying to it: no
// answer in time, or the run stopped), the form gives way to who answered
// what, or to the notice. The form is a part of the question's event
// (events.js asks for it: "parts").

import * as api from "./api.js";
import { el, button, waitText } from "./dom.js";
import { ui, sender, contentText, inThreadWords, senderLabel } from "./shared.js";
import { renderMarkdown } from "./markdown.js";
import { subscribe } from "./bus.js";

// answers holds, per open thread's view, what closed each question:
// question id -> {from, action, fields} or {from, closed}.
const answers = new WeakMap();

function answersOf(v) {
  let m = answers.get(v);
  if (!m) answers.set(v, (m = new Map()));
  return m;
}

// questionOf is ev's meta.question when ev is a question with fields.
function questionOf(ev) {
  const q = ev && ev.type === "message" && ev.meta ? ev.meta.question : null;
  return q && typeof q === "object" && Array.isArray(q.fields) ? q : null;
}

// questionAsk is the question's body: what the agent asks, in its words
// (the coordinator's whole message, with the command line that answers
// it, is under "Details").
function questionAsk(ev) {
  const q = questionOf(ev);
  return renderMarkdown(q && q.message ? String(q.message) : contentText(ev));
}

// questionBox is the question's card: its form, how long it waits, what
// closed it once known, and the details.
function questionBox(v, ev) {
  const q = questionOf(ev);
  const box = el("div", "question-card");
  if (!q) return box;
  if (q.title) box.append(el("div", "question-title card-title", String(q.title)));
  const form = el("form", "question-form");
  const inputs = [];
  for (const f of q.fields) {
    if (!f || typeof f.name !== "string") continue;
    const field = fieldInput(f);
    inputs.push(field);
    form.append(field.node);
  }
  const error = el("p", "question-error");
  error.hidden = true;
  error.setAttribute("role", "alert");
  const row = el("div", "question-actions card-actions");
  const send = el("button", "question-send btn-primary btn-block", "Send answer");
  send.type = "submit";
  const decline = button("question-decline btn-block", "Decline", () => post(v, ev, box, { event: ev.id, action: "decline" }), "Tell the agent you will not answer");
  decline.type = "button";
  row.append(send, decline);
  form.append(error, row);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const fields = {};
    for (const f of inputs) {
      const val = f.value();
      if (val !== undefined) fields[f.name] = val;
    }
    post(v, ev, box, { event: ev.id, fields });
  });
  box.append(form, el("p", "question-wait"), el("p", "question-answer"), details(ev));
  paintWait(box, q);
  const known = answersOf(v).get(ev.id);
  if (known) queueMicrotask(() => markClosed(v, ev.id, known));
  return box;
}

// details holds what a person rarely needs: the question as the
// coordinator wrote it, with the command line that answers it from a
// terminal, and its id.
function details(ev) {
  const d = el("details", "more");
  d.append(el("summary", "", "Details"));
  d.append(el("p", "", "The question as the coordinator wrote it:"));
  d.append(renderMarkdown(contentText(ev)));
  d.append(el("p", "meta", `Question ${ev.id}, version ${ev.seq}`));
  return d;
}

// fieldInput is one field's label, hint and input, and how to read its
// value: undefined when left empty, else a value of the field's type. A
// yes-or-no field, and each choice of a many-choice field, is a switch
// (design primitives, docs/ui.md).
function fieldInput(f) {
  const name = f.name;
  const many = f.type === "array";
  const wrap = el(many ? "fieldset" : "label", "question-field");
  wrap.dataset.field = name;
  const title = String(f.title || name) + (f.required ? " (required)" : "");
  const head = el(many ? "legend" : "span", "question-label", title);
  const hint = f.description ? el("span", "question-hint", String(f.description)) : null;
  const def = f.default;
  const enums = Array.isArray(f.enum) ? f.enum.map(String) : [];
  const label = (i) => (Array.isArray(f.enum_titles) && f.enum_titles[i] ? String(f.enum_titles[i]) : enums[i]);
  const toggle = (cls) => {
    const c = el("input", cls);
    c.type = "checkbox";
    c.classList.add("switch");
    return c;
  };
  if (many) {
    wrap.append(head);
    if (hint) wrap.append(hint);
    const boxes = enums.map((x, i) => {
      const opt = el("label", "question-choice switch-row");
      const c = toggle("question-input");
      c.value = x;
      c.checked = Array.isArray(def) && def.includes(x);
      opt.append(el("span", "", label(i)), c);
      wrap.append(opt);
      return c;
    });
    return { name, node: wrap, value: () => boxes.filter((c) => c.checked).map((c) => c.value) };
  }
  if (f.type === "boolean") {
    // The words on the left, the switch on the right, as every switch.
    wrap.classList.add("switch-row");
    const words = el("span", "stack grow");
    words.append(head);
    if (hint) words.append(hint);
    const input = toggle("question-input");
    input.name = name;
    input.checked = def === true;
    wrap.append(words, input);
    return { name, node: wrap, value: () => input.checked };
  }
  wrap.append(head);
  if (hint) wrap.append(hint);
  let input;
  let value;
  if (f.type === "string" && enums.length) {
    input = el("select", "question-input");
    input.append(new Option(f.required ? "Choose…" : "No answer", ""));
    enums.forEach((x, i) => input.append(new Option(label(i), x)));
    input.value = typeof def === "string" && enums.includes(def) ? def : "";
    value = () => input.value || undefined;
  } else if (f.type === "number" || f.type === "integer") {
    input = el("input", "question-input");
    input.type = "number";
    input.step = f.type === "integer" ? "1" : "any";
    input.inputMode = f.type === "integer" ? "numeric" : "decimal";
    if (typeof f.minimum === "number") input.min = String(f.minimum);
    if (typeof f.maximum === "number") input.max = String(f.maximum);
    if (typeof def === "number") input.value = String(def);
    value = () => (input.value === "" ? undefined : Number(input.value));
  } else {
    input = el("input", "question-input");
    input.type = { email: "email", uri: "url", date: "date" }[f.format] || "text";
    if (typeof f.min_length === "number") input.minLength = f.min_length;
    if (typeof f.max_length === "number") input.maxLength = f.max_length;
    if (typeof def === "string") input.value = def;
    value = () => (input.value === "" ? undefined : input.value);
  }
  input.name = name;
  input.required = !!f.required;
  wrap.append(input);
  return { name, node: wrap, value };
}

// post sends the answer control as the viewer; a refusal or an answer
// that changed nothing is said under the form.
async function post(v, ev, box, answer) {
  if (v !== ui.view || v.cursor !== null) return;
  const error = box.querySelector(".question-error");
  error.hidden = true;
  for (const n of box.querySelectorAll(".question-field.invalid")) n.classList.remove("invalid");
  const say = (text) => {
    error.textContent = text;
    error.hidden = false;
  };
  try {
    const res = await api.post(`/threads/${encodeURIComponent(v.id)}/events`, { type: "control", from: sender(), content: { answer } }, { signal: v.ctrl.signal });
    if (res && res.ignored) say(res.ignored.reason);
  } catch (err) {
    if (v.ctrl.signal.aborted) return;
    say(inThreadWords(err.message, v.id));
    const field = err.body && typeof err.body.field === "string" ? err.body.field.replace(/^content\.answer\.fields\./, "") : "";
    const bad = field && Array.from(box.querySelectorAll(".question-field")).find((n) => n.dataset.field === field);
    if (bad) bad.classList.add("invalid");
  }
}

// noteQuestionAnswer records what ev says of a question with fields (a
// person's answer control, or the coordinator's notice that it waits no
// more) and marks the question, when it is drawn.
function noteQuestionAnswer(v, ev) {
  const a = closingOf(v, ev);
  if (!a || answersOf(v).has(a.event)) return;
  answersOf(v).set(a.event, a);
  markClosed(v, a.event, a);
}

// closingOf is {event, from, action, fields} for an answer control,
// {event, from, closed} for the coordinator's notice replying to a
// question with fields, else null.
function closingOf(v, ev) {
  const meta = ev.meta || {};
  if (ev.type === "message") {
    // The question may be drawn after its notice (an older page loads
    // later), so any notice of the coordinator replying to an event is
    // kept; only a question's is ever shown.
    const tags = Array.isArray(meta.tags) ? meta.tags : [];
    if (!tags.includes("coordinator") || tags.includes("permission") || meta.question || meta.via !== ev.from || typeof meta.reply_to !== "string") return null;
    return { event: meta.reply_to, from: ev.from, closed: contentText(ev) };
  }
  if (ev.type !== "control" || !ev.content || typeof ev.content !== "object") return null;
  const a = ev.content.answer;
  if (!a || typeof a.event !== "string") return null;
  return { event: a.event, from: ev.from, action: a.action === "decline" ? "decline" : "accept", fields: a.fields || {} };
}

// markClosed puts who answered what (or the notice) in place of the form.
function markClosed(v, id, a) {
  const node = v.nodes.get(v.byID.get(id));
  const ev = v.events.get(v.byID.get(id));
  const q = questionOf(ev);
  const line = node && node.querySelector(".question-answer");
  if (!line || !q) return;
  node.classList.add("answered");
  if (a.closed !== undefined) {
    line.textContent = `No longer waiting: ${a.closed}`;
    return;
  }
  const who = senderLabel(v, a.from).name;
  if (a.action === "decline") {
    line.textContent = `${who} declined to answer`;
    return;
  }
  const said = q.fields
    .filter((f) => f && Object.prototype.hasOwnProperty.call(a.fields, f.name))
    .map((f) => {
      const x = a.fields[f.name];
      const enums = Array.isArray(f.enum) ? f.enum : [];
      const shown = (s) => (enums.indexOf(s) >= 0 && Array.isArray(f.enum_titles) && f.enum_titles[enums.indexOf(s)]) || String(s);
      return `${f.title || f.name}: ${Array.isArray(x) ? x.map(shown).join(", ") : typeof x === "boolean" ? (x ? "yes" : "no") : shown(x)}`;
    });
  line.textContent = said.length ? `${who} answered: ${said.join("; ")}` : `${who} answered`;
}

// paintWait says how long the question still waits (meta.question.expires_at,
// set by the coordinator from permission_timeout_s).
function paintWait(box, q) {
  const line = box.querySelector(".question-wait");
  if (line && q.expires_at) line.textContent = waitText(q.expires_at);
}

// paintWaits refreshes every open question's wait line.
function paintWaits() {
  const v = ui.view;
  if (!v) return;
  for (const box of document.querySelectorAll("#event-list .event:not(.answered) .question-card")) {
    const art = box.closest(".event");
    const q = questionOf(v.events.get(v.byID.get(art.dataset.id)));
    if (q) paintWait(box, q);
  }
}

// wireQuestions keeps the wait lines current.
export function wireQuestions() {
  setInterval(paintWaits, 1000);
}

// A question with fields is answered with its form rather than with a
// reply: its words are the event's body (unless it is a permission
// request too, whose sentence cards.js gives), its form the card.
subscribe("parts", (d) => {
  const tags = d.ev.meta && Array.isArray(d.ev.meta.tags) ? d.ev.meta.tags : [];
  if (!tags.includes("question") || !questionOf(d.ev)) return;
  if (!d.ask) d.ask = questionAsk(d.ev);
  d.form = questionBox(d.v, d.ev);
});
subscribe("added", ({ v, ev }) => noteQuestionAnswer(v, ev));
