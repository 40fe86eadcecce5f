// sw.js: the service worker of the installable web app. It shows the Web
// Push notifications the bridge sends (bridge/notify: {title, body, url,
// event, category, options}) and opens the thread at the event when one is
// tapped. It has no fetch handler: pages and API calls go to the network
// exactly as without it (nothing is cached, nothing is intercepted).

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));

self.addEventListener("push", (e) => {
  let n = {};
  try {
    n = e.data ? e.data.json() : {};
  } catch {
    n = { body: e.data ? e.data.text() : "" };
  }
  const url = typeof n.url === "string" && n.url.startsWith("/ui/") ? n.url : "/ui/";
  const opts = {
    body: typeof n.body === "string" ? n.body : "",
    tag: typeof n.event === "string" ? n.event : undefined,
    data: { url },
    icon: "/ui/static/icon-192.png",
    badge: "/ui/static/icon-192.png",
    // A permission request waits for an answer: keep it on screen.
    requireInteraction: n.category === "permission",
  };
  e.waitUntil(self.registration.showNotification(typeof n.title === "string" && n.title ? n.title : "agent-bridge", opts));
});

// A tap opens the thread at the event: an open page of the app goes there,
// else a new one opens.
self.addEventListener("notificationclick", (e) => {
  e.notification.close();
  const target = new URL((e.notification.data && e.notification.data.url) || "/ui/", self.location.origin).href;
  e.waitUntil(
    (async () => {
      const pages = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
      for (const c of pages) {
        if (new URL(c.url).pathname.startsWith("/ui") && "navigate" in c) {
          await c.focus();
          return c.navigate(target);
        }
      }
      return self.clients.openWindow(target);
    })(),
  );
});
