// The Stripe pay page (templates/checkout/stripe_pay.html): Stripe.js's Payment Element for the
// intent, confirmed in the browser, so the card number never reaches Floodgate.
//
// Fallback, for the tests only in practice: localstripe's Stripe.js stand-in has no confirmPayment.
// There the element is its card element, createToken sends the card straight to localstripe, and
// only the token's id is posted to us (stripe-card), which attaches it and confirms the intent.
(function () {
  "use strict";
  var form = document.getElementById("payment-form");
  if (!form || typeof Stripe !== "function") return;
  // Stripe.js words its own messages (a declined card, a wrong number) in the page's language.
  var stripe = Stripe(form.dataset.key, {locale: form.dataset.locale || "auto"});
  var elements = stripe.elements({clientSecret: form.dataset.secret});
  var element = elements.create("payment");
  var button = document.getElementById("submit");
  var error = document.getElementById("payment-error");
  element.mount("#payment-element");
  button.disabled = false;

  function fail(message) {
    error.textContent = message;
    error.hidden = false;
    // A declined intent is done with: another card is a new attempt, started from the order.
    document.getElementById("another-card").hidden = false;
  }
  function paid() {
    window.location.assign(form.dataset.return);
  }
  function byToken() {
    return stripe.createToken(element).then(function (result) {
      if (result.error) throw new Error(result.error.message);
      var body = new FormData();
      body.append("token", result.token.id);
      return fetch(form.dataset.cardUrl, {
        method: "POST",
        body: body,
        credentials: "same-origin",
        headers: {"X-CSRFToken": form.querySelector("[name=csrfmiddlewaretoken]").value},
      }).then(function (answer) {
        return answer.json().then(function (data) {
          if (!answer.ok) throw new Error(data.detail || form.dataset.sayFailed);
        });
      });
    });
  }
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    button.disabled = true;
    error.hidden = true;
    var done;
    if (typeof stripe.confirmPayment === "function") {
      done = stripe.confirmPayment({
        elements: elements,
        confirmParams: {return_url: form.dataset.return},
        redirect: "if_required",
      }).then(function (result) {
        if (result.error) throw new Error(result.error.message);
      });
    } else {
      done = byToken();
    }
    done.then(paid, function (reason) { fail(reason.message); });
  });
})();
