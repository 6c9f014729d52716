// Live countdowns: any element with data-countdown="<ISO time>" ticks every second.
// data-done is shown at zero; data-reload="1" reloads the page then (the sale just opened);
// data-starts announces the start to the page ("floodgate:started").
(function () {
  "use strict";
  function format(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    var d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
    var m = Math.floor((s % 3600) / 60), sec = s % 60;
    var pad = function (n) { return String(n).padStart(2, "0"); };
    return (d ? d + "d " : "") + (d || h ? pad(h) + ":" : "") + pad(m) + ":" + pad(sec);
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var left = Date.parse(el.dataset.countdown) - now;
      if (left > 0) {
        el.textContent = format(left);
      } else if (!el.dataset.finished) {
        el.dataset.finished = "1";
        el.textContent = el.dataset.done || "now";
        // A sale's start: pages that wait for it (the waiting room) say what is true now.
        if (el.dataset.starts !== undefined) document.dispatchEvent(new CustomEvent("floodgate:started"));
        if (el.dataset.reload) { setTimeout(function () { location.reload(); }, 1200); }
      }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { tick(); setInterval(tick, 250); });
})();

// A drop page watches its drop's state: when it changes (paused, resumed, sold out,
// live) the page reloads, so a paused sale hides the buy button within seconds.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var page = document.querySelector("[data-watch-url]");
    if (!page) return;
    var shown = page.dataset.watchState;
    function check() {
      fetch(page.dataset.watchUrl, {headers: {"Accept": "application/json"}})
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (d) {
          if (!d) return;
          document.dispatchEvent(new CustomEvent("floodgate:drop", {detail: d}));
          var now = d.state === "live" && d.sold_out ? "sold_out" : d.state;
          if (now !== shown) { location.reload(); }
        })
        .catch(function () {})
        .finally(function () { setTimeout(check, 3000); });
    }
    setTimeout(check, 3000);
  });
})();

// UTC times (<time data-local>) get the buyer's own clock beside them: "14:05 UTC · 15:05 CET".
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("time[data-local]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when) || when.getTimezoneOffset() === 0) return;  // the buyer's clock is UTC already
      var options = el.dataset.local === "date"
        ? {weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", timeZoneName: "short"}
        : {hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short"};
      var local = document.createElement("span");
      local.className = "local-time";
      local.textContent = " · " + when.toLocaleString(document.documentElement.lang || undefined, options);
      el.after(local);
    });
  });
})();
