// sw.js: the service worker of the installable web app. It shows the Web
// Push notifications the bridge sends (bridge/notify: {title, body, url,
// event, category, options, actions, answer_as}) and opens the thread at
// the event when one is tapped. A permission request's notification
// carries its answers as actions (Allow once, Deny) where the platform
// shows them; tapping one answers from here, with this browser's login
// cookie, without opening a window. It has no fetch handler: pages and API
// calls go to the network exactly as without it (nothing is cached,
// nothing is intercepted).

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));

const ICON = "/ui/static/icon-192.png";

const str = (v) => (typeof v === "string" ? v : "");

self.addEventListener("push", (e) => {
  let n = {};
  try {
    n = e.data ? e.data.json() : {};
  } catch {
    n = { body: e.data ? e.data.text() : "" };
  }
  const url = str(n.url).startsWith("/ui/") ? n.url : "/ui/";
  // Actions answer as the person the request asks, so only a request to
  // one carries them; the rest open the request.
  const actions = Array.isArray(n.actions) && str(n.answer_as) ? n.actions.filter((a) => a && str(a.action) && str(a.title) && str(a.option)).slice(0, 2) : [];
  const opts = {
    body: str(n.body),
    tag: str(n.event) || undefined,
    data: { url, thread: str(n.thread), event: str(n.event), as: str(n.answer_as), answers: Object.fromEntries(actions.map((a) => [a.action, a.option])) },
    actions: actions.map((a) => ({ action: a.action, title: a.title })),
    icon: ICON,
    badge: ICON,
    // A permission request waits for an answer: keep it on screen.
    requireInteraction: n.category === "permission",
  };
  e.waitUntil(self.registration.showNotification(str(n.title) || "agent-bridge", opts));
});

// A tap on an action answers the request; a tap on the notification
// itself opens the thread at the event: an open page of the app goes
// there, else a new one opens.
self.addEventListener("notificationclick", (e) => {
  e.notification.close();
  const data = e.notification.data || {};
  const option = e.action && data.answers ? data.answers[e.action] : "";
  if (option) {
    e.waitUntil(answer(data, option));
    return;
  }
  e.waitUntil(open(data.url));
});

async function open(url) {
  const target = new URL(url || "/ui/", self.location.origin).href;
  const pages = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  for (const c of pages) {
    if (new URL(c.url).pathname.startsWith("/ui") && "navigate" in c) {
      await c.focus();
      return c.navigate(target);
    }
  }
  return self.clients.openWindow(target);
}

// answer posts the permission control for option, as the person the
// request asks, with the login cookie this browser holds (a same-origin
// request from here carries it, and its Origin is the bridge's own). An
// answer that changed nothing ("already answered by … at …") or failed is
// said in a notification whose tap opens the request.
async function answer(data, option) {
  let title = "";
  let body = "";
  try {
    const res = await fetch(`/threads/${encodeURIComponent(data.thread)}/events`, {
      method: "POST",
      credentials: "same-origin",
      headers: { Accept: "application/json", "Content-Type": "application/json" },
      body: JSON.stringify({ type: "control", from: data.as, content: { permission: { event: data.event, option } } }),
    });
    const out = await res.json().catch(() => ({}));
    if (!res.ok) {
      title = "Not answered";
      body = (out.error && out.error.message) || `The bridge answered ${res.status}.`;
    } else if (out.ignored) {
      title = "Already answered";
      body = out.ignored.reason;
    }
  } catch {
    title = "Not answered";
    body = "The bridge could not be reached. Tap to open the request.";
  }
  if (!title) return;
  await self.registration.showNotification(title, { body, tag: data.event || undefined, data: { url: data.url }, icon: ICON, badge: ICON });
}
