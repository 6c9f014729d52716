// Live countdowns: any element with data-countdown="<ISO time>" ticks every second.
// data-done is shown at zero; data-reload="1" reloads the page then (the sale just opened).
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
          var now = d.state === "live" && d.sold_out ? "sold_out" : d.state;
          if (now !== shown) { location.reload(); }
        })
        .catch(function () {})
        .finally(function () { setTimeout(check, 3000); });
    }
    setTimeout(check, 3000);
  });
})();
