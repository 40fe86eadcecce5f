// phone.js: the person away from the desk (contract 7.2). It registers the
// service worker (sw.js) that shows Web Push notifications; lets the
// person turn notifications on or off for this browser, per category (the
// "Notifications" sheet), and says within seconds what went wrong when
// the browser's push service cannot be reached; tells the bridge which
// thread this page shows, so no push interrupts a person already looking
// (POST /push/visible); opens the event a notification points at
// (/ui/threads/<id>#event-<event>); and shows how long a permission
// request still waits. Pairing links are gate.js's; the notifications
// button of its greeting is this module's.

import * as api from "./api.js";
import { $, el, waitText } from "./dom.js";
import { ui, DEVICE_KEY } from "./shared.js";
import { publish, subscribe as follow } from "./bus.js";

// visibleEvery is how often a page showing a thread says so; the bridge
// forgets it after 45 s.
const visibleEvery = 20000;
// subscribeWithin bounds the wait for the browser's push service (Google's
// for Chromium, Mozilla's, Apple's): one it cannot reach makes subscribe()
// hang for half a minute or more, with nothing on screen.
const subscribeWithin = 8000;

// registration is the service worker's registration (null where the
// browser has none: plain http from another machine, or no support).
let registration = null;

export async function wirePhone() {
  $("push-btn").addEventListener("click", openPushDialog);
  $("push-close").addEventListener("click", () => $("push-dialog").close());
  $("push-save").addEventListener("click", () => save().catch((err) => dialogError(err.message)));
  $("push-off").addEventListener("click", () => turnOff().catch((err) => dialogError(err.message)));
  document.addEventListener("visibilitychange", () => sayVisible(true));
  window.addEventListener("hashchange", openTarget);
  follow("control-ignored", noteIgnored);
  setInterval(() => sayVisible(false), 5000);
  setInterval(paintWaits, 1000);
  openTarget();
  if ("serviceWorker" in navigator) {
    try {
      registration = await navigator.serviceWorker.register("/ui/sw.js", { scope: "/ui/" });
      $("push-btn").hidden = !("PushManager" in window);
      // The pairing greeting offers notifications once the page knows
      // this browser can receive them.
      $("pair-push").hidden = $("push-btn").hidden;
    } catch {
      registration = null;
    }
  }
}

// wirePushOffer connects the pairing greeting's notifications button
// (gate.js greets a phone just paired, before the rest of the page is
// wired).
export function wirePushOffer() {
  $("pair-push").addEventListener("click", () => {
    $("pair-dialog").close();
    openPushDialog();
  });
}

async function subscription() {
  return registration && registration.pushManager ? registration.pushManager.getSubscription() : null;
}

function dialogError(msg) {
  const e = $("push-error");
  e.textContent = msg;
  e.hidden = !msg;
}

// openPushDialog shows this browser's choices: its subscription's, else
// all on for a new one.
async function openPushDialog() {
  dialogError("");
  $("push-device").value = localStorage.getItem(DEVICE_KEY) || (/Mobi|Android|iPhone/.test(navigator.userAgent) ? "phone" : "browser");
  const sub = await subscription();
  let cats = { permission: true, question: true, failed: true, threads: [] };
  if (sub) {
    try {
      const res = await api.get("/push/subscriptions");
      const mine = (res.subscriptions || []).find((s) => s.endpoint === sub.endpoint);
      if (mine) cats = mine.categories;
    } catch {
      // The choices shown are the defaults; saving sends them again.
    }
  }
  $("push-permission").checked = !!cats.permission;
  $("push-question").checked = !!cats.question;
  $("push-failed").checked = !!cats.failed;
  const id = ui.view ? ui.view.id : null;
  $("push-replies-row").hidden = !id;
  $("push-replies").checked = !!id && (cats.threads || []).includes(id);
  $("push-replies").dataset.threads = JSON.stringify(cats.threads || []);
  $("push-state").textContent = sub ? "On for this browser." : "Off for this browser.";
  $("push-off").hidden = !sub;
  $("push-dialog").showModal();
}

// withinTime settles as promise does, or rejects with message after ms.
function withinTime(promise, ms, message) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// subscribe asks the browser's push service for this device's address,
// within subscribeWithin, and says in a sentence why it could not.
async function subscribe(key) {
  const late = `This browser's push service did not answer within ${subscribeWithin / 1000} s, so notifications cannot be turned on. ` +
    "The browser reaches it over the internet (Google's for Chrome, Mozilla's for Firefox, Apple's for Safari): check this device's connection, then Save again.";
  try {
    return await withinTime(registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key }), subscribeWithin, late);
  } catch (err) {
    if (err.message === late) throw err;
    throw new Error(`This browser's push service refused to register this device (${err.message}). Check this device's connection, then Save again.`);
  }
}

// save subscribes this browser (asking the browser's permission once) and
// sends its choices to the bridge; the button says it is working meanwhile.
async function save() {
  const btn = $("push-save");
  btn.disabled = true;
  btn.textContent = "Saving…";
  dialogError("");
  try {
    await saveChoices();
  } finally {
    btn.disabled = false;
    btn.textContent = "Save";
  }
}

async function saveChoices() {
  if (!registration) throw new Error("This browser cannot receive notifications from this page: open it over https.");
  if ((await Notification.requestPermission()) !== "granted") throw new Error("Notifications are blocked for this site in the browser's settings.");
  let sub = await subscription();
  if (!sub) {
    const { public_key: key } = await api.get("/push/key");
    sub = await subscribe(key);
  }
  let threads = JSON.parse($("push-replies").dataset.threads || "[]");
  const id = ui.view ? ui.view.id : null;
  if (id) {
    threads = threads.filter((t) => t !== id);
    if ($("push-replies").checked) threads.push(id);
  }
  const device = $("push-device").value.trim() || "browser";
  localStorage.setItem(DEVICE_KEY, device);
  await api.post("/push/subscriptions", {
    ...sub.toJSON(),
    device,
    categories: { permission: $("push-permission").checked, question: $("push-question").checked, failed: $("push-failed").checked, threads },
  });
  $("push-dialog").close();
  sayVisible(true);
}

async function turnOff() {
  const sub = await subscription();
  if (sub) {
    await api.post("/push/unsubscribe", { endpoint: sub.endpoint });
    await sub.unsubscribe();
  }
  $("push-dialog").close();
}

let lastSaid = { thread: null, at: 0 };

// sayVisible tells the bridge which thread this page shows, when that
// changes and every visibleEvery while it does.
async function sayVisible(force) {
  const sub = await subscription().catch(() => null);
  if (!sub) return;
  const thread = !document.hidden && ui.view ? ui.view.id : null;
  const now = Date.now();
  if (!force && thread === lastSaid.thread && (thread === null || now - lastSaid.at < visibleEvery)) return;
  lastSaid = { thread, at: now };
  try {
    await api.post("/push/visible", { endpoint: sub.endpoint, thread: thread || "", visible: !!thread });
  } catch {
    lastSaid.at = 0; // try again on the next tick
  }
}

// openTarget shows the event a notification's link names
// (#event-<id>), once the thread's events are on the page.
async function openTarget() {
  const m = location.hash.match(/^#event-([0-9A-Za-z]+)$/);
  if (!m) return;
  for (let i = 0; i < 100; i++) {
    const v = ui.view;
    if (v && v.byID && v.byID.size > 0 && location.pathname.endsWith("/" + encodeURIComponent(v.id))) {
      publish("show", { thread: v.id, event: m[1] });
      return;
    }
    await api.sleep(100);
  }
}

// paintWaits shows, on each permission request still waiting, how long
// it waits (meta.permission.expires_at, set by the coordinator).
function paintWaits() {
  const v = ui.view;
  if (!v || !v.events) return;
  for (const node of document.querySelectorAll("#event-list .event .permission")) {
    const art = node.closest(".event");
    const ev = v.events.get(v.byID.get(art.dataset.id));
    const exp = ev && ev.meta && ev.meta.permission && ev.meta.permission.expires_at;
    let line = node.querySelector(".permission-wait");
    if (!exp || art.classList.contains("answered")) {
      if (line) line.remove();
      continue;
    }
    if (!line) node.append((line = el("div", "permission-wait")));
    line.textContent = waitText(exp);
  }
}

// noteIgnored puts the bridge's sentence for an answer that changed
// nothing (such as "already answered by … at …") on the request itself,
// where the person who tapped looks, phone layout included.
function noteIgnored({ content, reason }) {
  const id = content && content.permission && content.permission.event;
  if (!id) return;
  const art = document.querySelector(`#event-list .event[data-id="${CSS.escape(id)}"] .permission`);
  if (!art) return;
  let line = art.querySelector(".permission-refused");
  if (!line) art.append((line = el("div", "permission-refused")));
  line.textContent = reason;
}
