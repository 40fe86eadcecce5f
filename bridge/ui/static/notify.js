// notify.js: a browser notification when a question or a permission
// request addressed to the viewer arrives while the page is hidden, once
// the viewer has allowed notifications (the "Notify me" button; a browser
// only asks after a click). With notifications allowed, a hidden tab keeps
// its stream (stream.js), since it has something to listen for. It
// follows the stream ("message"); a tap on a notification opens its thread
// ("navigate").

import { $ } from "./dom.js";
import { sender, threadName, notifyEnabled } from "./shared.js";
import { publish, subscribe } from "./bus.js";

// asksViewer is whether ev waits for the viewer: a [USER QUESTION] or a
// permission request (one that carries meta.permission: the notice that a
// request waits no more asks nothing) addressed to them.
function asksViewer(ev) {
  const tags = ev.meta && Array.isArray(ev.meta.tags) ? ev.meta.tags : [];
  const request = tags.includes("permission") && !!ev.meta.permission;
  return ev.type === "message" && (tags.includes("question") || request) && ev.to === sender();
}

// maybeNotify raises the notification for a live event, when it asks the
// viewer and the page is hidden.
function maybeNotify(ev) {
  if (!document.hidden || !notifyEnabled() || !asksViewer(ev)) return;
  const perm = ev.meta && ev.meta.permission;
  const title = perm ? `${ev.from} asks for permission` : `${ev.from} asks you`;
  const what = perm && perm.tool_call && typeof perm.tool_call.title === "string" ? perm.tool_call.title : String(ev.content || "");
  try {
    const n = new Notification(title, { body: `${what.slice(0, 200)}\n— ${threadName(ev.thread)}`, tag: ev.id });
    n.addEventListener("click", () => {
      window.focus();
      publish("navigate", { id: ev.thread });
      n.close();
    });
  } catch {
    // Some browsers allow notifications only from a service worker; the
    // question stays highlighted in the thread.
  }
}

function renderButton() {
  const b = $("notify-btn");
  if (!("Notification" in window)) {
    b.hidden = true;
    return;
  }
  const p = Notification.permission;
  b.hidden = false;
  b.disabled = p !== "default";
  b.textContent = p === "granted" ? "Notifications on" : p === "denied" ? "Notifications blocked" : "Notify me";
  b.title =
    p === "denied"
      ? "The browser blocks notifications for this page; allow them in its site settings"
      : "A notification when an agent asks you something while this tab is hidden";
}

// wireNotifications connects the "Notify me" button.
export function wireNotifications() {
  renderButton();
  $("notify-btn").addEventListener("click", async () => {
    try {
      await Notification.requestPermission();
    } finally {
      renderButton();
    }
  });
}

subscribe("message", ({ ev }) => maybeNotify(ev));
