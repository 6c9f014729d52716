// The hold page's time, for every buyer: a warning said once before it runs out (an alert), "I need
// more time" answered in place (the API; without script the form posts), and at zero the page says
// the hold ended where the buyer is, with nothing they typed lost (no reload). The words come from
// the template's data-say-* attributes.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var countdown = document.getElementById("hold-countdown");
    var warning = document.getElementById("hold-warning");
    if (!countdown || !warning) return;
    var ended = document.getElementById("hold-ended");
    var warnAt = parseInt(warning.dataset.warnSeconds || "60", 10) * 1000;
    var warned = false;

    function say(region, text) {
      region.hidden = false;
      region.querySelector("p").textContent = text;  // set after showing: the alert is read out
    }

    countdown.addEventListener("floodgate:tick", function (event) {
      if (!warned && event.detail.left <= warnAt) {
        warned = true;
        say(warning, warning.dataset.sayWarn);
      }
    });

    countdown.addEventListener("floodgate:done", function () {
      warning.hidden = true;
      document.querySelectorAll(".hold .buy button, #size-form button, #discount-form button").forEach(
        function (button) { button.disabled = true; });
      say(ended, ended.dataset.say);
    });

    var form = document.getElementById("more-time-form");
    if (!form) return;
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var button = form.querySelector("button");
      button.disabled = true;
      fetch(form.dataset.api, {
        method: "POST", credentials: "same-origin",
        headers: {"Accept": "application/json", "X-CSRFToken": form.elements.namedItem("csrfmiddlewaretoken").value}
      }).then(function (response) {
        return response.json().then(function (data) { return {ok: response.ok, data: data}; });
      }).then(function (got) {
        if (!got.ok) { say(warning, got.data.detail); form.remove(); return; }
        countdown.dataset.countdown = got.data.expires_at;
        var until = new Date(got.data.expires_at);
        var time = until.toLocaleTimeString(document.documentElement.lang || undefined);
        document.querySelectorAll("#held-until time").forEach(function (el) {
          el.setAttribute("datetime", got.data.expires_at);
          el.textContent = time;
          var local = el.nextElementSibling;
          if (local && local.classList.contains("local-time")) local.remove();
        });
        warned = false;
        say(warning, warning.dataset.sayMore.replace("{time}", time));
        button.disabled = false;
        form.dataset.pressesLeft = String(parseInt(form.dataset.pressesLeft, 10) - 1);
        if (form.dataset.pressesLeft === "0") form.remove();
      }).catch(function () { form.submit(); });
    });
  });
})();
