// app.js: the agent-bridge web UI's entry point. One page; the history API
// routes /ui/threads/{id}. This file wires the page together: it imports
// every view and starts it, since a view imports only leaf modules (api,
// dom, shared, markdown, controls, bus), never another view, and calls no
// other view: the views talk through the bus (bus.js), each publishing what
// happened and subscribing to what it follows. Each view has its module:
// threadlist.js (the thread list), thread.js (the open thread and its
// scrolling), events.js (one event), cards.js (a permission request's
// card), composer.js, panel.js (state, participants, invite), presence.js,
// receipts.js, revision.js, stream.js (the tab's stream), notify.js,
// suggestions.js, phone.js (the installable app: push, deep links),
// gate.js (signing in: login and pairing links, the sign-in gate),
// attachments.js (files in the thread), changes.js (a change card),
// search.js, schedules.js, deliveries.js (what became of each device's
// pushes), questionform.js (an agent's question with fields as a form), and
// the Markdown of markdown.js. Untrusted content reaches the page only
// through textContent or DOMPurify.

import * as api from "./api.js";
import { $, fillIcons } from "./dom.js";
import { ui, sender, DEVICE_KEY } from "./shared.js";
import { createThread, renderThreads, flushRead } from "./threadlist.js";
import { openThread, routeID, wireScrolling, navigate } from "./thread.js";
import { markQuestions } from "./events.js";
import "./cards.js";
import { paintAllReceipts } from "./receipts.js";
import "./presence.js";
import { wireComposer } from "./composer.js";
import { wirePanel } from "./panel.js";
import { wireRevision } from "./revision.js";
import { startStream, onVisibility, setConn } from "./stream.js";
import { wireNotifications } from "./notify.js";
import { wireSuggestions } from "./suggestions.js";
import { wirePhone, wirePushOffer } from "./phone.js";
import { wireGate, redeemLoginLink, redeemPairing } from "./gate.js";
import { wireAttachments } from "./attachments.js";
import "./changes.js";
import { wireSearch } from "./search.js";
import { wireSchedules } from "./schedules.js";
import { wireDeliveries } from "./deliveries.js";
import { wireQuestions } from "./questionform.js";

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
      if (ui.view) paintAllReceipts(ui.view);
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
    if (ui.view) paintAllReceipts(ui.view);
  } catch {
    // The links fall back to --coordinator-url.
  }
}

// ------------------------------------------------------------------ rename

function startRename() {
  $("thread-menu").hidePopover();
  $("rename-input").value = $("thread-title").textContent;
  $("rename-error").hidden = true;
  $("rename-dialog").showModal();
  $("rename-input").select();
}

async function rename() {
  const v = ui.view;
  const name = $("rename-input").value.trim();
  if (!v || !name) return;
  try {
    await api.post(`/threads/${encodeURIComponent(v.id)}/events`, { type: "thread.renamed", from: sender(), content: name }, { signal: v.ctrl.signal });
    $("rename-dialog").close();
  } catch (err) {
    $("rename-error").textContent = err.message;
    $("rename-error").hidden = false;
  }
}

// whoAmI asks the bridge who this browser is (GET /auth/whoami) and whom
// it counts as people (GET /ping): the page posts as the id its credential
// writes as, and only on a bridge without tokens (serve --open) does the
// person say whom to post as. A 401 here opens the sign-in gate, and the
// page goes on once signed in.
async function whoAmI() {
  try {
    const [me, ping] = await Promise.all([api.get("/auth/whoami"), api.get("/ping")]);
    ui.me = { sender: me.sender || "", open: !!me.open, name: me.name || "" };
    ui.humans = Array.isArray(ping.humans) ? ping.humans : null;
  } catch (err) {
    if (!(err instanceof api.ApiError)) {
      // The bridge is not reachable yet: ask again in a moment (the
      // stream says "reconnecting" meanwhile).
      setTimeout(whoAmI, 2000);
      return;
    }
    // A bridge older than whoami: the "Post as" field, as before.
    ui.me = { sender: "", open: true, name: "" };
  }
  $("sender-row").hidden = !ui.me.open;
  const device = localStorage.getItem(DEVICE_KEY);
  $("whoami").textContent = ui.me.open ? "" : `Signed in as ${sender()}${device ? ` on “${device}”` : ""} ·`;
  markQuestions();
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
  $("panel-close").addEventListener("click", () => document.body.classList.remove("show-panel"));
  $("drawer-backdrop").addEventListener("click", () => document.body.classList.remove("show-threads", "show-panel"));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") document.body.classList.remove("show-threads", "show-panel");
  });
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
      const id = await createThread($("new-thread-name").value.trim());
      $("new-thread-name").value = "";
      navigate(id);
    } catch (err) {
      setConn("error: " + err.message);
    }
  });
  $("thread-search").addEventListener("input", renderThreads);
  // A thread in the list is a link: a plain tap opens it in the page.
  $("thread-list").addEventListener("click", (e) => {
    const a = e.target.closest("a.thread-link");
    if (!a || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
    e.preventDefault();
    navigate(a.closest(".thread-item").dataset.id);
  });

  $("rename-btn").addEventListener("click", startRename);
  $("rename-cancel").addEventListener("click", () => $("rename-dialog").close());
  $("rename-form").addEventListener("submit", (e) => {
    e.preventDefault();
    rename();
  });
  // A menu's link or button closes the menu once used.
  for (const item of document.querySelectorAll("#thread-menu .menu-item")) {
    item.addEventListener("click", () => $("thread-menu").hidePopover());
  }

  window.addEventListener("popstate", () => openThread(routeID()));
  window.addEventListener("pagehide", flushRead);
  document.addEventListener("visibilitychange", onVisibility);
  document.addEventListener("animationend", (e) => {
    if (e.animationName === "flash") e.target.classList.remove("highlight");
  });
}

async function main() {
  fillIcons(document);
  wireGate();
  wirePushOffer();
  // A login or pairing link signs this browser in before the first request.
  await redeemLoginLink();
  await redeemPairing();
  await whoAmI();
  wire();
  wireDrawers();
  wireScrolling();
  wireComposer();
  wireAttachments();
  wirePanel();
  wireRevision();
  wireNotifications();
  wireSuggestions();
  wirePhone();
  wireSearch();
  wireSchedules();
  wireDeliveries();
  wireQuestions();
  showRunsLink();
  loadCoordinators();
  // The stream's first connection loads the thread list and the thread.
  if (!document.hidden) startStream();
}

main();
