// The waiting room's opt-in to Web Push (checkout/push.py): registers the shop's service worker
// (/push-worker.js, scope /), subscribes with the shop's VAPID key and posts the subscription to
// the API; "stop" unsubscribes the browser and tells the shop. Shown only where the browser can push.
"use strict";

(() => {
  const box = document.getElementById("push-optin");
  if (!box || !("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) return;
  const on = document.getElementById("push-on");
  const off = document.getElementById("push-off");
  const status = document.getElementById("push-status");
  const csrf = box.querySelector("input[name=csrfmiddlewaretoken]").value;

  const keyBytes = (text) => {
    const padded = (text + "=".repeat((4 - (text.length % 4)) % 4)).replace(/-/g, "+").replace(/_/g, "/");
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  };
  const tell = (method, subscription) =>
    fetch(box.dataset.api, {
      method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
      body: JSON.stringify(subscription.toJSON()),
    });
  const show = (subscribed, words) => {
    on.hidden = subscribed;
    off.hidden = !subscribed;
    status.textContent = words || "";
  };
  const registration = () => navigator.serviceWorker.register(box.dataset.worker, { scope: "/" });

  on.addEventListener("click", async () => {
    on.disabled = true;
    try {
      if ((await Notification.requestPermission()) !== "granted") {
        show(false, box.dataset.denied);
        return;
      }
      const found = await registration();
      await navigator.serviceWorker.ready;
      const subscription = await found.pushManager.subscribe({
        userVisibleOnly: true,
        applicationServerKey: keyBytes(box.dataset.key),
      });
      const answer = await tell("POST", subscription);
      if (!answer.ok) throw new Error(String(answer.status));
      show(true, box.dataset.on);
      off.focus();
    } catch (error) {
      show(false, box.dataset.failed);
    } finally {
      on.disabled = false;
    }
  });

  off.addEventListener("click", async () => {
    const found = await navigator.serviceWorker.getRegistration("/");
    const subscription = found && (await found.pushManager.getSubscription());
    if (subscription) {
      await tell("DELETE", subscription).catch(() => null);
      await subscription.unsubscribe();
    }
    show(false, box.dataset.off);
    on.focus();
  });

  box.hidden = false;
  if (Notification.permission === "denied") {
    on.disabled = true;
    status.textContent = box.dataset.denied;
    return;
  }
  navigator.serviceWorker.getRegistration("/").then(async (found) => {
    const subscription = found && (await found.pushManager.getSubscription());
    if (subscription) {
      await tell("POST", subscription).catch(() => null);  // this buyer, should another have signed in here
      show(true, box.dataset.on);
    }
  });
})();
