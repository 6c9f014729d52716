// The saved-cards page (templates/checkout/cards.html): Stripe.js confirms a SetupIntent in the
// browser, so the card goes to Stripe and only the SetupIntent's id is posted to us. Real Stripe.js
// mounts its Payment Element and confirmSetup (3-D Secure included); localstripe's stand-in has no
// confirmSetup, so there its card element and confirmCardSetup do the same.
(function () {
  "use strict";
  var form = document.getElementById("setup-form");
  if (!form || typeof Stripe !== "function") return;
  var stripe = Stripe(form.dataset.key, {locale: form.dataset.locale || "auto"});
  var secret = form.dataset.secret;
  var button = document.getElementById("save-card");
  var error = document.getElementById("setup-error");
  var elements = stripe.elements({clientSecret: secret});
  var element = elements.create("payment");
  element.mount("#setup-element");
  button.disabled = false;

  function confirm() {
    if (typeof stripe.confirmSetup === "function") {
      return stripe.confirmSetup({
        elements: elements,
        confirmParams: {return_url: form.dataset.return},
        redirect: "if_required",
      });
    }
    return stripe.confirmCardSetup(secret, {payment_method: {card: element}});
  }
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    button.disabled = true;
    error.hidden = true;
    confirm().then(function (result) {
      if (result.error || !result.setupIntent) {
        throw new Error((result.error && result.error.message) || form.dataset.sayFailed);
      }
      form.elements.setup_intent.value = result.setupIntent.id;
      form.submit();
    }).catch(function (reason) {
      error.textContent = reason.message || form.dataset.sayFailed;
      error.hidden = false;
      button.disabled = false;
    });
  });
})();
