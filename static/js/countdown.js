// Live countdowns: any element with data-countdown="<ISO time>" ticks every second.
// data-done is shown at zero; data-reload="1" reloads the page then (the sale just opened);
// each tick and the end are events on the element ("floodgate:tick", "floodgate:done");
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
  // The page brought up to date in place instead of a reload (the sale just opened, a hold ran
  // out): <main> is fetched again and swapped, the focus kept on the same control if it is still
  // there (else on the region marked data-refresh-focus), what changed said in the page's status
  // (the elements marked data-say-on-refresh), and the page's scripts told ("floodgate:refreshed")
  // to enhance what is new. Nothing the buyer typed elsewhere is lost; a failed fetch reloads.
  function refresh() {
    fetch(location.href, {credentials: "same-origin", headers: {"Accept": "text/html"}})
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        var main = document.querySelector("main");
        if (!fresh || !main) { location.reload(); return; }
        var focused = main.contains(document.activeElement) ? document.activeElement.id : "";
        main.replaceChildren.apply(main, Array.prototype.slice.call(fresh.childNodes));
        var title = new DOMParser().parseFromString(html, "text/html").title;
        if (title) document.title = title;
        document.dispatchEvent(new CustomEvent("floodgate:refreshed", {detail: main}));
        var target = (focused && document.getElementById(focused)) || main.querySelector("[data-refresh-focus]");
        if (target) target.focus();
        var say = document.getElementById("page-announce");
        if (say) {
          say.textContent = Array.prototype.map.call(main.querySelectorAll("[data-say-on-refresh]"), function (el) {
            return el.textContent.trim();
          }).join(". ");
        }
        tick();
      })
      .catch(function () { location.reload(); });
  }
  window.floodgateRefresh = refresh;

  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var left = Date.parse(el.dataset.countdown) - now;
      if (left > 0) {
        el.textContent = format(left);
        delete el.dataset.finished;  // a later time was given (a hold's "more time")
        el.dispatchEvent(new CustomEvent("floodgate:tick", {bubbles: true, detail: {left: left}}));
      } else if (!el.dataset.finished) {
        el.dataset.finished = "1";
        el.textContent = el.dataset.done || "now";
        el.dispatchEvent(new CustomEvent("floodgate:done", {bubbles: true}));
        // A sale's start: pages that wait for it (the waiting room) say what is true now.
        if (el.dataset.starts !== undefined) document.dispatchEvent(new CustomEvent("floodgate:started"));
        if (el.dataset.reload) { setTimeout(refresh, 1200); }
      }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { tick(); setInterval(tick, 250); });
})();

// A drop page watches its drop's state: when it changes (paused, resumed, sold out,
// live) the page is brought up to date in place, so a paused sale hides the buy button within seconds.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    if (!document.querySelector("[data-watch-url]")) return;
    function check() {
      var page = document.querySelector("[data-watch-url]");  // the page as it is now (refreshed in place)
      if (!page) return;
      var shown = page.dataset.watchState;
      fetch(page.dataset.watchUrl, {headers: {"Accept": "application/json"}})
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (d) {
          if (!d) return;
          document.dispatchEvent(new CustomEvent("floodgate:drop", {detail: d}));
          var now = d.state === "live" && d.sold_out ? "sold_out" : d.state;
          if (now !== shown) window.floodgateRefresh();
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
