// suggestions.js: the Suggestions panel. Agents send improvement ideas with
// POST /suggest (the original bridge's agent guide asks them to); the panel
// lists them, newest first, filtered by status. The bridge does not push
// suggestions on its streams, so the list is read when the panel opens and
// by its Refresh button; the count on the button (pending suggestions, the
// ones waiting for a decision) is read at start-up and whenever the panel
// reads them. Descriptions are Markdown (markdown.js); every
// other value reaches the page via textContent. A pending suggestion has
// Accept and Dismiss buttons, a decided one "Reopen"; each posts
// POST /suggestions/{id}/status as the viewer and reads the list again, so
// the status filter stays true.

import * as api from "./api.js";
import { $, el, button, shortDate, fullTime } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { sender } from "./shared.js";

// setStatus sets a suggestion's status as the viewer, then redraws the list.
async function setStatus(id, status, btn) {
  const err = $("suggestions-error");
  err.hidden = true;
  for (const b of btn.parentElement.querySelectorAll("button")) b.disabled = true;
  try {
    await api.post(`/suggestions/${encodeURIComponent(id)}/status`, { status, by: sender() });
  } catch (e) {
    err.textContent = "Could not change the suggestion: " + e.message;
    err.hidden = false;
    for (const b of btn.parentElement.querySelectorAll("button")) b.disabled = false;
    return;
  }
  await load();
}

// actions returns the buttons that change suggestion s's status.
function actions(s) {
  const row = el("div", "suggestion-actions");
  const act = (cls, text, status, title) => {
    const b = button("suggestion-" + cls, text, () => setStatus(s.id, status, b), title);
    row.append(b);
  };
  if (s.status === "pending") {
    act("accept", "Accept", "accepted", "Mark this suggestion accepted");
    act("dismiss", "Dismiss", "dismissed", "Dismiss this suggestion");
  } else {
    act("reopen", "Reopen", "pending", "Set this suggestion back to pending");
  }
  return row;
}

// load reads the suggestions with the chosen status ("" = all) and draws
// them; it also refreshes the count on the button when it read the pending
// ones.
async function load() {
  const status = $("suggestions-status").value;
  const err = $("suggestions-error");
  err.hidden = true;
  let res;
  try {
    res = await api.get("/suggestions" + (status ? `?status=${encodeURIComponent(status)}` : ""));
  } catch (e) {
    err.textContent = "Could not read the suggestions: " + e.message;
    err.hidden = false;
    return;
  }
  const list = (res.suggestions || []).slice().reverse(); // the API answers oldest first
  if (!status) showCount(list.filter((s) => s.status === "pending").length);
  else if (status === "pending") showCount(list.length);
  const ul = $("suggestions-list");
  ul.replaceChildren();
  if (list.length === 0) {
    ul.append(el("li", "suggestion-none", status ? `No ${status} suggestions.` : "No suggestions yet."));
    return;
  }
  for (const s of list) {
    const li = el("li", "suggestion");
    li.dataset.id = s.id || "";
    const head = el("div", "suggestion-head");
    const when = el("time", "suggestion-time", s.timestamp ? shortDate(s.timestamp) : "");
    when.dateTime = s.timestamp || "";
    when.title = s.timestamp ? fullTime(s.timestamp) : "";
    head.append(el("strong", "suggestion-title", s.title), el("span", "suggestion-from", "from " + (s.from || "?")), when);
    if (s.status) head.append(el("span", "suggestion-status status-" + s.status.replace(/[^a-z_]/g, ""), s.status));
    const desc = el("div", "suggestion-description");
    desc.append(renderMarkdown(s.description || ""));
    li.append(head, desc, actions(s));
    ul.append(li);
  }
}

function showCount(n) {
  $("suggestions-count").textContent = n > 0 ? String(n) : "";
}

// countSuggestions fills in the button's count at start-up.
async function countSuggestions() {
  try {
    const res = await api.get("/suggestions?status=pending");
    showCount((res.suggestions || []).length);
  } catch {
    // The count stays empty; opening the panel says what went wrong.
  }
}

// wireSuggestions connects the button, the dialog and its controls.
export function wireSuggestions() {
  const dlg = $("suggestions-dialog");
  $("suggestions-btn").addEventListener("click", () => {
    dlg.showModal();
    load();
  });
  $("suggestions-refresh").addEventListener("click", load);
  $("suggestions-status").addEventListener("change", load);
  $("suggestions-close").addEventListener("click", () => dlg.close());
  countSuggestions();
}
