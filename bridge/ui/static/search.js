// search.js: the search box (contract 8.6). A Search button in the sidebar
// opens a dialog (full screen on a phone); a query asks GET /search, whose
// hits list newest first with their thread, sender, time and the text around
// the match; tapping one opens its thread at that message. The module makes
// its own elements, so that the page's markup stays as it is. Text reaches
// the page only through textContent. A hit asks thread.js to show its
// event ("show").

import * as api from "./api.js";
import { el, button, shortDate, timeOf } from "./dom.js";
import { publish } from "./bus.js";

let dialog, input, list, status, more;
let next = "";
let query = "";

// wireSearch adds the Search button and its dialog.
export function wireSearch() {
  const open = button("btn search-open", "Search every thread", openSearch, "Search every thread: words, \"a phrase\", or a prefix such as decid*");
  open.id = "search-open";
  document.getElementById("sidebar-tools").append(open);

  dialog = el("dialog", "search-dialog");
  dialog.id = "search-dialog";
  dialog.setAttribute("aria-label", "Search");
  const form = el("form", "search-form");
  form.autocomplete = "off";
  input = el("input");
  input.id = "search-input";
  input.type = "search";
  input.placeholder = "Search all threads";
  input.setAttribute("aria-label", "Search all threads");
  const go = el("button", "search-go", "Search");
  go.type = "submit";
  const close = button("search-close", "Close", () => dialog.close());
  form.append(input, go, close);
  status = el("p", "search-status");
  status.id = "search-status";
  status.setAttribute("role", "status");
  list = el("ul", "search-results");
  list.id = "search-results";
  more = button("search-more", "More results", () => run(true));
  more.hidden = true;
  dialog.append(form, status, list, more);
  document.body.append(dialog);
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    run(false);
  });
}

function openSearch() {
  document.body.classList.remove("show-threads", "show-panel");
  if (!dialog.open) dialog.showModal();
  input.focus();
  input.select();
}

// run asks for the first page of the query in the box, or the next page.
async function run(again) {
  if (!again) {
    query = input.value.trim();
    next = "";
    list.replaceChildren();
  }
  if (!query) return;
  status.textContent = "Searching…";
  more.hidden = true;
  let path = "/search?q=" + encodeURIComponent(query);
  if (again && next) path += "&cursor=" + encodeURIComponent(next);
  try {
    const page = await api.get(path);
    for (const r of page.results || []) list.append(hit(r));
    next = page.next || "";
    more.hidden = !next;
    const n = list.children.length;
    status.textContent = n === 0 ? "Nothing matches." : n === 1 ? "1 message" : `${n} messages${next ? " so far" : ""}`;
  } catch (err) {
    status.textContent = err.message;
  }
}

// hit is one result: a button that opens its thread at the message.
function hit(r) {
  const li = el("li");
  const b = el("button", "search-hit");
  b.type = "button";
  b.dataset.thread = r.thread;
  b.dataset.event = r.event.id;
  const head = el("span", "search-hit-head");
  head.append(el("span", "search-hit-thread", r.thread_name || r.thread), el("span", "search-hit-who", `${r.event.from} · ${shortDate(r.event.ts)} ${timeOf(r.event.ts)}`));
  b.append(head, snippet(r.snippet, r.marks || []));
  b.addEventListener("click", () => openHit(r.thread, r.event.id));
  li.append(b);
  return li;
}

// snippet is the text around the match with the matched words marked;
// marks are [start, end) in code points.
function snippet(text, marks) {
  const p = el("span", "search-hit-text");
  const chars = Array.from(text);
  let at = 0;
  for (const [s, e] of marks) {
    if (s < at || e > chars.length || s > e) continue;
    p.append(document.createTextNode(chars.slice(at, s).join("")), el("mark", "", chars.slice(s, e).join("")));
    at = e;
  }
  p.append(document.createTextNode(chars.slice(at).join("")));
  return p;
}

// openHit opens the thread and scrolls to the event.
function openHit(thread, event) {
  dialog.close();
  const path = "/ui/threads/" + encodeURIComponent(thread);
  if (location.pathname !== path) history.pushState(null, "", path);
  document.body.classList.remove("show-threads", "show-panel");
  publish("show", { thread, event });
}
