// The Reserve button posts to the JSON API (the claim lane answers it before Django) instead of
// submitting the form: the buyer stays on the page for a "no", and a busy shop is retried after
// the Retry-After it sends. Without JavaScript, or if the API cannot be reached, the form still
// posts to the page's own endpoint. Its words come translated from the form's data-say-* attributes
// (templates/shop/_buy_messages.html), so this file holds none of its own.
(function () {
  "use strict";
  var MAX_RETRIES = 5;

  function field(form, name) {
    var input = form.elements.namedItem(name);
    return input && input.value ? input.value : null;
  }

  // A variant gone: its choice is disabled and says so; the answer's words name those left.
  function soldOut(form, name) {
    form.querySelectorAll("input[name=variant]").forEach(function (input) {
      if (input.value !== name) return;
      input.checked = false;
      input.disabled = true;
      var label = input.closest("label");
      if (!label) return;
      label.classList.add("sold-out");
      var left = label.querySelector(".variant-left");
      if (left) left.textContent = form.dataset.saySoldOut;
    });
  }

  function enhance(form) {
    var button = form.querySelector("button[type=submit]");
    var note = form.querySelector(".buy-status");
    var tries = 0;

    function say(text) {
      note.textContent = text;
      note.hidden = !text;
    }

    function holdUrl(id) {
      return form.dataset.holdUrl.replace(/0\/$/, id + "/");
    }

    function send() {
      var headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "X-CSRFToken": field(form, "csrfmiddlewaretoken"),
        "Idempotency-Key": field(form, "idempotency_key")  // a retry or double click: the same hold
      };
      var token = field(form, "admission_token");
      if (token) headers["X-Admission-Token"] = token;
      var body = {quantity: parseInt(field(form, "quantity") || "1", 10)};
      var unit = field(form, "unit");
      if (unit) body.unit = unit;
      var variant = field(form, "variant");  // the checked radio of the size picker, if any
      if (variant !== null) body.variant = variant;
      var code = field(form, "presale_code");  // the presale's form only
      if (code) body.presale_code = code;
      return fetch(form.dataset.api, {
        method: "POST", credentials: "same-origin", headers: headers, body: JSON.stringify(body)
      }).then(function (response) {
        return response.json().then(function (data) { return {response: response, data: data}; });
      });
    }

    // Busy while a request runs: aria-disabled, not disabled, so the focus stays on the button
    // (a disabled one drops it to the page's top) and a refusal is heard where the buyer is.
    var busy = false;
    function attempt() {
      busy = true;
      button.setAttribute("aria-disabled", "true");
      say(form.dataset.sayReserving);
      send().then(function (got) {
        var code = got.response.status, data = got.data;
        if (code === 200 || code === 201) {
          location.assign(holdUrl(data.id));
          return;
        }
        if (data.hold) {  // already holding this drop: show that hold
          location.assign(holdUrl(data.hold));
          return;
        }
        if (data.error === "not_admitted" && form.dataset.queueUrl) {
          location.assign(form.dataset.queueUrl);
          return;
        }
        var wait = parseInt(got.response.headers.get("Retry-After") || "", 10);
        if ((code === 503 || code === 429) && wait >= 0 && tries < MAX_RETRIES) {
          tries += 1;
          say(form.dataset.sayBusy.replace("{seconds}", String(Math.max(1, wait))));
          setTimeout(attempt, Math.max(1, wait) * 1000 * (0.75 + Math.random() / 2));
          return;
        }
        if (data.error === "variant_sold_out") soldOut(form, data.variant);
        tries = 0;
        busy = false;
        button.removeAttribute("aria-disabled");
        say(data.detail || form.dataset.sayFailed);
      }).catch(function () {
        form.submit();  // the API is out of reach (or answered no JSON): the page's own way
      });
    }

    // The page's watcher (countdown.js) passes on the drop's JSON every few seconds.
    document.addEventListener("floodgate:drop", function (event) {
      (event.detail.variants || []).forEach(function (v) { if (v.sold_out) soldOut(form, v.name); });
    });

    // A drop in seats and sizes: a seat chosen picks its size; a size chosen shows its own seats.
    form.addEventListener("change", function (event) {
      var input = event.target;
      if (input.name === "unit" && input.value) {
        var group = input.tagName === "SELECT" ? input.selectedOptions[0].parentElement : input.closest(".seat-group");
        var size = group && group.dataset.variant;
        form.querySelectorAll("input[name=variant]").forEach(function (radio) {
          if (size !== undefined && radio.value === size && !radio.disabled) radio.checked = true;
        });
      } else if (input.name === "variant") {
        form.querySelectorAll(".seat-group[data-variant]").forEach(function (group) {
          var other = group.dataset.variant !== input.value;
          group.hidden = other;
          var chosen = group.querySelector("input[name=unit]:checked");
          if (other && chosen) form.querySelector("input[name=unit][value='']").checked = true;
        });
      }
    });

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (!busy) attempt();
    });
  }

  function enhanceAll(root) {
    root.querySelectorAll("form.buy[data-api]").forEach(function (form) {
      if (form.dataset.enhanced) return;
      form.dataset.enhanced = "1";
      enhance(form);
    });
  }
  enhanceAll(document);
  document.addEventListener("floodgate:refreshed", function (event) { enhanceAll(event.detail); });
})();
