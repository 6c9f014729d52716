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
