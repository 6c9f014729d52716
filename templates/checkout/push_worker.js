// The shop's service worker (served at /push-worker.js, scope /): shows a push the shop sent, in
// the words the server wrote (the buyer's language), and opens its page when it is tapped.
"use strict";

self.addEventListener("push", (event) => {
  let data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch (error) {
    return;  // not one of the shop's: nothing to show
  }
  if (!data.title) return;
  event.waitUntil(
    self.registration.showNotification(data.title, {
      body: data.body || "",
      tag: data.tag || undefined,  // a repeat of the same moment replaces, never stacks
      renotify: Boolean(data.tag),
      data: { url: data.url || "/" },
    }),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const url = new URL((event.notification.data && event.notification.data.url) || "/", self.location.origin);
  if (url.origin !== self.location.origin) return;  // only the shop's own pages
  event.waitUntil(
    self.clients.matchAll({ type: "window", includeUncontrolled: true }).then((open) => {
      for (const client of open) {
        if (client.url === url.href && "focus" in client) return client.focus();
      }
      return self.clients.openWindow(url.href);
    }),
  );
});
