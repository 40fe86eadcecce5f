// app.js: the agent-bridge web UI's entry point. One page; the history API
// routes /ui/threads/{id}. This file wires the page together: it imports
// every view and hands each the others' functions through hooks.js, since
// a view imports only leaf modules (api, dom, shared, markdown, controls,
// hooks), never another view. Each view has its module: threadlist.js (the thread list), thread.js (the open
// thread and its scrolling), events.js (one event), composer.js, panel.js
// (state, participants, invite), presence.js, receipts.js, revision.js,
// stream.js (the tab's stream), notify.js, suggestions.js, phone.js (the
// installable app: push, pairing, deep links), questionform.js (an agent's
// question with fields as a form), and the
// Markdown of markdown.js. Untrusted content reaches the page only through
// textContent or DOMPurify.

import * as api from "./api.js";
import { $ } from "./dom.js";
import { ui, sender } from "./shared.js";
import { hooks } from "./hooks.js";
import { createThread, renderThreads, flushRead, loadThreads, noteThread, markRead } from "./threadlist.js";
import { openThread, routeID, wireScrolling, navigate, addEvent, loadOlder, scrollToBottom, showEvent } from "./thread.js";
import { markQuestions, renderEvent, markGroups, notePartyReply, notePermissionAnswer, refreshSenderLabels, senderLabel } from "./events.js";
import { paintReceipts, paintRunning, loadReceipts, onReceipt } from "./receipts.js";
import { loadPresence, onPresence, markStale, renderPresence } from "./presence.js";
import { wireComposer, setReply, answerQuestion, showComposerError } from "./composer.js";
import { wirePanel, showControlError, control, refreshState } from "./panel.js";
import { wireRevision, renderRevision } from "./revision.js";
import { startStream, onVisibility, setConn } from "./stream.js";
import { wireNotifications, maybeNotify, notifyEnabled } from "./notify.js";
import { wireSuggestions } from "./suggestions.js";
import { redeemPairing, wirePhone } from "./phone.js";
import { isFieldQuestion, questionBox, noteQuestionAnswer, wireQuestions } from "./questionform.js";

// The views call each other only through hooks (hooks.js): this is every
// function one view asks of another, filled in before anything runs.
Object.assign(hooks, {
  // threadlist.js
  loadThreads, noteThread, markRead, renderThreads,
  // thread.js
  openThread, routeID, navigate, addEvent, loadOlder, scrollToBottom, showEvent,
  // events.js
  renderEvent, markGroups, notePartyReply, notePermissionAnswer, refreshSenderLabels, senderLabel,
  // receipts.js
  paintReceipts, paintRunning, loadReceipts, onReceipt,
  // presence.js
  loadPresence, onPresence, markStale, renderPresence,
  // composer.js
  setReply, answerQuestion, showComposerError,
  // panel.js
  control, refreshState,
  // revision.js
  renderRevision,
  // notify.js
  maybeNotify, notifyEnabled,
  // questionform.js
  isFieldQuestion, questionBox, noteQuestionAnswer,
});

const SENDER_KEY = "agent-bridge-sender";

// showRunsLink points the header's Runs link at the coordinator's
// dashboard, whose address the bridge was told (serve --coordinator-url);
// receipts link their runs there too.
async function showRunsLink() {
  try {
    const res = await fetch("/ui/config.json", { cache: "no-store" });
    const cfg = await res.json();
    if (cfg && typeof cfg.coordinator_url === "string" && /^https?:\/\//.test(cfg.coordinator_url)) {
      ui.coordinatorURL = cfg.coordinator_url.replace(/\/+$/, "");
      const a = $("runs-link");
      a.href = ui.coordinatorURL + "/";
      a.hidden = false;
      // Receipts drawn before this answer get their run links now.
      const v = ui.view;
      if (v) for (const id of v.receipts.keys()) paintReceipts(v, id);
    }
  } catch {
    // No link then.
  }
}

// loadCoordinators asks the bridge which coordinators are registered
// (contract 7.1), so that a receipt links its run on the coordinator that
// reported it (receipts.js), on whichever machine, before serve's
// --coordinator-url. A bridge without registrations leaves that.
async function loadCoordinators() {
  try {
    const list = await api.get("/coordinators");
    const urls = new Map();
    for (const c of list.coordinators || []) {
      if (typeof c.status_url === "string" && /^https?:\/\//.test(c.status_url)) urls.set(c.id, c.status_url.replace(/\/+$/, ""));
    }
    ui.coordinatorURLs = urls;
    const v = ui.view;
    if (v) for (const id of v.receipts.keys()) paintReceipts(v, id);
  } catch {
    // The links fall back to --coordinator-url.
  }
}

// ------------------------------------------------------------------ rename

function startRename() {
  $("rename-input").value = $("thread-title").textContent;
  $("rename-form").hidden = false;
  $("thread-title").hidden = true;
  $("rename-btn").hidden = true;
  $("rename-input").focus();
}

function endRename() {
  $("rename-form").hidden = true;
  $("thread-title").hidden = false;
  $("rename-btn").hidden = false;
}

async function rename() {
  const v = ui.view;
  const name = $("rename-input").value.trim();
  if (!v || !name) return;
  try {
    await api.post(`/threads/${encodeURIComponent(v.id)}/events`, { type: "thread.renamed", from: sender(), content: name }, { signal: v.ctrl.signal });
    endRename();
  } catch (err) {
    showControlError(err.message);
  }
}

// ------------------------------------------------------------------ drawers

// On a narrow screen the thread list and the thread panel are drawers over
// the conversation, opened by the header's buttons and closed by the
// backdrop, Escape or picking a thread.
function toggleDrawer(name) {
  const cls = "show-" + name;
  const open = !document.body.classList.contains(cls);
  document.body.classList.remove("show-threads", "show-panel");
  document.body.classList.toggle(cls, open);
}

function wireDrawers() {
  $("threads-toggle").addEventListener("click", () => toggleDrawer("threads"));
  $("panel-toggle").addEventListener("click", () => toggleDrawer("panel"));
  $("drawer-backdrop").addEventListener("click", () => document.body.classList.remove("show-threads", "show-panel"));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") document.body.classList.remove("show-threads", "show-panel");
  });
}

// -------------------------------------------------------------------- token

// tokenTried is whether the person has given a token yet: the first 401
// only asks, a later one says why the token was refused.
let tokenTried = false;

function askToken(err) {
  const d = $("token-dialog");
  const msg = $("token-error");
  if (tokenTried) {
    msg.textContent = err && err.message ? err.message : "The token was refused.";
    msg.hidden = false;
  }
  if (!d.open) d.showModal();
  $("token-input").focus();
}

function wire() {
  const saved = localStorage.getItem(SENDER_KEY);
  if (saved) $("sender").value = saved;
  $("sender").addEventListener("change", () => {
    localStorage.setItem(SENDER_KEY, sender());
    markQuestions();
  });

  $("new-thread").addEventListener("submit", async (e) => {
    e.preventDefault();
    try {
      await createThread($("new-thread-name").value.trim());
      $("new-thread-name").value = "";
    } catch (err) {
      setConn("error: " + err.message);
    }
  });
  $("thread-search").addEventListener("input", renderThreads);

  $("rename-btn").addEventListener("click", startRename);
  $("rename-cancel").addEventListener("click", endRename);
  $("rename-form").addEventListener("submit", (e) => {
    e.preventDefault();
    rename();
  });

  api.setUnauthorizedHandler(askToken);
  // Escape would close the dialog and leave every request waiting for a
  // token with no way to give one.
  $("token-dialog").addEventListener("cancel", (e) => e.preventDefault());
  $("token-form").addEventListener("submit", () => {
    $("token-error").hidden = true;
    tokenTried = true;
    api.login($("token-input").value.trim()).catch(askToken);
    $("token-input").value = "";
  });

  window.addEventListener("popstate", () => openThread(routeID()));
  window.addEventListener("pagehide", flushRead);
  document.addEventListener("visibilitychange", onVisibility);
  document.addEventListener("animationend", (e) => {
    if (e.animationName === "flash") e.target.classList.remove("highlight");
  });
}

// redeemLoginLink logs the browser in from a login link
// (/ui/login#code=…): the code leaves the address bar and the history
// first, then is exchanged once for the login cookie. A used or expired
// code falls back to asking for the token, on the first 401.
async function redeemLoginLink() {
  if (location.pathname !== "/ui/login") return;
  const code = new URLSearchParams(location.hash.slice(1)).get("code");
  history.replaceState(null, "", "/ui");
  if (!code) return;
  try {
    await api.loginWithCode(code);
  } catch (err) {
    setConn("login link: " + err.message);
  }
}

async function main() {
  await redeemLoginLink();
  // A pairing link logs this browser in before the first request.
  await redeemPairing();
  wire();
  wireDrawers();
  wireScrolling();
  wireComposer();
  wirePanel();
  wireRevision();
  wireNotifications();
  wireSuggestions();
  wirePhone();
  wireQuestions();
  showRunsLink();
  loadCoordinators();
  // The stream's first connection loads the thread list and the thread.
  if (!document.hidden) startStream();
}

main();
