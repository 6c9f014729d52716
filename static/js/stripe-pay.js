// The Stripe pay page (templates/checkout/stripe_pay.html): Stripe.js's Payment Element for the
// intent, confirmed in the browser, so the card number never reaches Floodgate. A card whose bank
// asks for 3-D Secure is challenged by Stripe.js (a frame from hooks.stripe.com); a challenge left
// open (the page reloaded) is resumed with handleNextAction.
//
// Fallback, for the tests only in practice: localstripe's Stripe.js stand-in has no confirmPayment.
// There the element is its card element, createToken sends the card straight to localstripe, and
// only the token's id is posted to us (stripe-card, mounted only off Stripe's own API), which
// attaches it and confirms the intent; a challenge is then the stand-in's confirmCardPayment.
(function () {
  "use strict";
  var form = document.getElementById("payment-form");
  if (!form || typeof Stripe !== "function") return;
  // Stripe.js words its own messages (a declined card, a wrong number) in the page's language.
  var stripe = Stripe(form.dataset.key, {locale: form.dataset.locale || "auto"});
  var secret = form.dataset.secret;
  var button = document.getElementById("submit");
  var error = document.getElementById("payment-error");
  var elements = null;
  var element = null;
  if (!form.dataset.challenge) {
    elements = stripe.elements({clientSecret: secret});
    element = elements.create("payment");
    element.mount("#payment-element");
  }
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
  // What a finished challenge left: authorised, or the bank said no (or the buyer cancelled).
  function authenticated(result) {
    if (result.error) throw new Error(result.error.message || form.dataset.sayNotAuthenticated);
    var status = result.paymentIntent && result.paymentIntent.status;
    if (status !== "requires_capture" && status !== "succeeded") {
      throw new Error(form.dataset.sayNotAuthenticated);
    }
  }
  function challenge() {
    if (typeof stripe.handleNextAction === "function") {
      return stripe.handleNextAction({clientSecret: secret}).then(authenticated);
    }
    return stripe.confirmCardPayment(secret).then(authenticated);
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
          if (data.challenge) return challenge();
        });
      });
    });
  }
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    button.disabled = true;
    error.hidden = true;
    var done;
    if (form.dataset.challenge) {
      done = challenge();
    } else if (typeof stripe.confirmPayment === "function") {
      // Stripe.js runs a 3-D Secure challenge itself when the bank asks for one.
      done = stripe.confirmPayment({
        elements: elements,
        confirmParams: {return_url: form.dataset.return},
        redirect: "if_required",
      }).then(function (result) {
        if (result.error) throw new Error(result.error.message);
      });
    } else if (form.dataset.cardUrl) {
      done = byToken();
    } else {
      done = Promise.reject(new Error(form.dataset.sayFailed));
    }
    done.then(paid, function (reason) { fail(reason.message); });
  });
})();
