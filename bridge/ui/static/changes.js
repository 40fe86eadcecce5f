// changes.js: an agent's change under its reply (contract 8.1,
// docs/workspaces.md). A reply whose meta.change says what its run changed
// in its worktree gets a card: the files with their lines added and
// removed, a button that opens the diff (the change's diff attachment,
// rendered by the vendored diff2html), and Merge and Discard, which post a
// person's change control. The coordinator's notice answering it
// (meta.change_result) marks the participant's cards merged or discarded,
// or says why it was refused. Every button is at least 44 px tall. The card
// is a part of the reply's event (events.js asks for it: "parts"); Merge
// and Discard post through the panel ("control").
import { el, button } from "./dom.js";
import { publish, subscribe } from "./bus.js";
import { html as diffHTML } from "./vendor/diff2html.js";
import DOMPurify from "./vendor/purify.es.js";

let styled = false;

// style loads the cards' and diff2html's style sheets once.
function style() {
  if (styled) return;
  styled = true;
  for (const href of ["/ui/static/vendor/diff2html.min.css", "/ui/static/changes.css"]) {
    const link = document.createElement("link");
    link.rel = "stylesheet";
    link.href = href;
    document.head.append(link);
  }
}

const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

// changeCard returns the card of reply ev's change, or null when it has
// none.
function changeCard(v, ev) {
  const ch = ev.meta && ev.meta.change;
  if (!ch || !Array.isArray(ch.files)) return null;
  style();
  const card = el("section", "change-card");
  card.dataset.participant = ev.from;
  card.dataset.seq = ev.seq;
  card.append(el("p", "change-summary", `${ev.from} changed ${plural(ch.files.length, "file", "files")} (+${ch.added} −${ch.removed}) on its branch, from ${ch.base}.`));
  const list = el("ul", "change-files");
  for (const f of ch.files) {
    const li = el("li", "change-file");
    li.append(el("span", "change-path", f.status === "renamed" && f.from ? `${f.from} → ${f.path}` : f.path));
    li.append(el("span", "change-status", f.status));
    li.append(el("span", "change-plus", "+" + f.added), el("span", "change-minus", "−" + f.removed));
    list.append(li);
  }
  card.append(list);
  const view = el("div", "change-diff");
  view.hidden = true;
  const actions = el("div", "change-actions");
  const diff = button("change-show", "Show the diff", () => toggleDiff(ch, view, diff), "Show what changed, line by line");
  if (!ch.diff) diff.disabled = true;
  const merge = button("change-merge", "Merge", () => publish("control", { content: { change: { merge: { participant: ev.from } } } }), `Merge ${ev.from}'s branch into ${ch.base}`);
  const discard = button("change-discard", "Discard", () => confirmDiscard(ev.from, discard), `Drop ${ev.from}'s branch`);
  actions.append(diff, merge, discard);
  card.append(actions, view, el("p", "change-state"));
  const result = v.changeResults && v.changeResults.get(ev.from);
  if (result && result.seq > ev.seq) markCard(card, result.r);
  return card;
}

// confirmDiscard asks for a second tap before it discards.
function confirmDiscard(participant, btn) {
  if (btn.dataset.armed !== "1") {
    btn.dataset.armed = "1";
    btn.textContent = "Tap again to discard";
    return;
  }
  btn.dataset.armed = "";
  btn.textContent = "Discard";
  publish("control", { content: { change: { discard: { participant } } } });
}

// toggleDiff opens the change's diff, read once from its attachment.
async function toggleDiff(ch, view, btn) {
  if (!view.hidden) {
    view.hidden = true;
    btn.textContent = "Show the diff";
    return;
  }
  view.hidden = false;
  btn.textContent = "Hide the diff";
  if (view.dataset.loaded) return;
  view.textContent = "Loading the diff…";
  try {
    // An id is "sha256:<hex>"; the bridge's path takes it as it is.
    if (!/^sha256:[0-9a-f]+$/.test(ch.diff)) throw new Error("its id is not an attachment id");
    const res = await fetch(`/attachments/${ch.diff}`, { credentials: "same-origin" });
    if (!res.ok) throw new Error(`the bridge answered ${res.status}`);
    const text = await res.text();
    // diff2html escapes the diff's text; the sanitiser parses its HTML
    // into nodes (the UI's own scripts parse no HTML) and drops anything
    // active all the same.
    view.replaceChildren(DOMPurify.sanitize(diffHTML(text, { drawFileList: false, outputFormat: "line-by-line", matching: "lines" }), { RETURN_DOM_FRAGMENT: true, FORBID_ATTR: ["style"] }));
    if (ch.diff_truncated) view.prepend(el("p", "change-cut", "This diff was cut at 5 MiB."));
    view.dataset.loaded = "1";
  } catch (err) {
    view.textContent = `The diff could not be read: ${err.message}.`;
  }
}

// markCard shows what became of a card's change.
function markCard(card, r) {
  if (r.state !== "merged" && r.state !== "discarded") return;
  card.classList.add("change-" + r.state);
  for (const b of card.querySelectorAll(".change-merge, .change-discard")) b.hidden = true;
  const into = r.into ? ` into ${r.into}` : "";
  card.querySelector(".change-state").textContent = r.state === "merged" ? `Merged${into}.` : "Discarded.";
}

// noteChangeResult records the coordinator's notice answering a change
// control and marks the participant's earlier cards.
function noteChangeResult(v, ev) {
  const r = ev.meta && ev.meta.change_result;
  if (!r || !r.participant) return;
  if (!v.changeResults) v.changeResults = new Map();
  if (r.state === "merged" || r.state === "discarded") v.changeResults.set(r.participant, { seq: ev.seq, r });
  for (const card of document.querySelectorAll(`#event-list .change-card[data-participant="${CSS.escape(r.participant)}"]`)) {
    if (Number(card.dataset.seq) < ev.seq) markCard(card, r);
  }
}

subscribe("parts", (d) => {
  const meta = d.ev.meta || {};
  if (meta.change) d.change = changeCard(d.v, d.ev);
  if (meta.change_result) noteChangeResult(d.v, d.ev);
});
