"""Checkout pages and the provider webhook."""

from __future__ import annotations

import json
import logging
import re
from typing import NoReturn

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from catalogue import selectors as catalogue
from checkout import cards, emails, exchange, invoices, refunds, reminders, selectors, services, stripe_page
from checkout.models import EVENT_ID_MAX, Payment, PaymentState
from checkout.providers import get_provider
from checkout.providers.base import BadWebhook, PermanentProviderError, ProviderError
from checkout.providers.stripe import INTENT_ID, NOT_AUTHENTICATED, StripeProvider
from checkout.tasks import process_webhook_event
from core.answers import Error
from core.api import error_response, signed_in
from core.errors import FloodgateError
from core.text import storable_json
from holds.services import effective_state

log = logging.getLogger(__name__)

MAX_WEBHOOK_BODY = 64 * 1024
TOKEN_ID = re.compile(r"tok_[A-Za-z0-9]{1,64}")
# An intent the buyer can still pay on our page (requires_action: a 3-D Secure challenge left open).
PAYABLE = frozenset({"requires_payment_method", "requires_confirmation", "requires_action"})


@require_POST
@login_required
def pay(request: HttpRequest, hold_id: int) -> HttpResponse:
    try:
        started = services.start_payment(hold_id=hold_id, buyer_id=signed_in(request))
    except FloodgateError as error:
        messages.error(request, error.detail)
        return redirect("hold", hold_id=hold_id)
    return redirect(started.payment.redirect_url)  # an allowed address (checkout.redirects)


@login_required
def order(request: HttpRequest, order_id: int) -> HttpResponse:
    found = selectors.order_of_buyer(order_id=order_id, buyer_id=signed_in(request))
    if found is None:
        raise Http404(_("There is no such order among yours."))
    hold_state = effective_state(found.hold)
    context = {
        "order": found,
        "data": selectors.order_json(found),
        "seats": sorted(unit.label for unit in found.hold.units.all()),
        # After a decline: another card while the hold runs, else "reserve again" if units are left.
        "hold_state": hold_state,
        "on_sale": hold_state in {"released", "expired"} and catalogue.on_sale(found.drop),
        "refunds": list(found.refunds.all()),
        "cancellable": selectors.cancellable(found),
        "shipment": selectors.shipment_answer(found),
        "invoices": invoices.of_order(found.pk),
        "exchange": exchange.standing(found),
    }
    return render(request, "checkout/order.html", context)


@require_POST
@login_required
def order_exchange(request: HttpRequest, order_id: int) -> HttpResponse:
    """The order page's exchange form: put units on it (action=list) or take them back (withdraw)."""
    try:
        if request.POST.get("action") == "withdraw":
            exchange.withdraw(order_id=order_id, buyer_id=signed_in(request))
            messages.success(request, _("Taken back: the units nobody was offered yet are yours again."))
        else:
            quantity = request.POST.get("quantity", "1")
            exchange.list_units(
                order_id=order_id,
                buyer_id=signed_in(request),
                quantity=int(quantity) if quantity.isascii() and quantity.isdigit() else quantity,
            )
            messages.success(
                request,
                _("On the exchange: the next buyer in line gets the offer; once they pay, you are refunded."),
            )
    except FloodgateError as error:
        messages.error(request, error.detail)
    return redirect("order", order_id=order_id)


@login_required
def invoice(request: HttpRequest, order_id: int, invoice_id: int) -> HttpResponse:
    """An invoice or credit note of the buyer's own order, as PDF in the page's language."""
    found = invoices.of_buyer(order_id=order_id, invoice_id=invoice_id, buyer_id=signed_in(request))
    if found is None:
        raise Http404(_("There is no such invoice among yours."))
    return invoices.pdf_response(found)


@require_POST
@login_required
def cancel(request: HttpRequest, order_id: int) -> HttpResponse:
    try:
        refunds.cancel_order(order_id=order_id, buyer_id=signed_in(request))
    except FloodgateError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, _("Your order is cancelled: you are not charged."))
    return redirect("order", order_id=order_id)


@login_required
def orders(request: HttpRequest) -> HttpResponse:
    return render(
        request, "checkout/orders.html", {"orders": selectors.orders_of(buyer_id=signed_in(request))}
    )


@csrf_exempt
@require_POST
def webhook(request: HttpRequest, provider: str) -> JsonResponse:
    """Verify, record once, hand to a task. Anything wrong is a 400 and changes nothing."""
    try:
        adapter = get_provider(provider)
    except KeyError:
        raise Http404(f"No payment provider called {provider!r}.") from None
    try:
        body = _webhook_body(request)
        event = adapter.parse_webhook(body=body, headers=dict(request.headers))
        payload = json.loads(body)  # parsed already by the adapter, so it is JSON of a sane depth
        # Whatever the adapter let through must fit the row: a 500 would make the provider retry.
        if len(event.event_id) > EVENT_ID_MAX:
            raise BadWebhook(f"The event id is longer than {EVENT_ID_MAX} characters.")
        if not storable_json(payload):
            raise BadWebhook("The body nests too deep or has a string with NUL or invalid Unicode.")
    except BadWebhook as error:
        return JsonResponse(Error(error="bad_webhook", detail=str(error)).dump(), status=400)
    if event.type == "ignored":
        # Correctly signed but of no use to the saga: 2xx, or Stripe retries and then disables us.
        log.info("webhook %s:%s (%s) ignored", provider, event.event_id, event.reason)
        return JsonResponse({"received": event.event_id, "ignored": True})
    try:
        event_pk = services.record_webhook(provider_name=provider, event=event, payload=payload)
    except FloodgateError as error:  # the same event id with another body: the first stays
        return error_response(error)
    if event_pk is not None:
        process_webhook_event.delay(event_pk)
    return JsonResponse({"received": event.event_id})


def _stripe_payment(request: HttpRequest, intent_id: str) -> Payment:
    """The signed-in buyer's own Stripe payment for this intent, else 404 (someone else's is unknown)."""
    if not INTENT_ID.fullmatch(intent_id):  # garbage (a NUL too) never reaches the database
        raise Http404("There is no such payment among yours.")
    payment = (
        Payment.objects.select_related("order")
        .filter(provider="stripe", session_id=intent_id, order__buyer_id=signed_in(request))
        .first()
    )
    if payment is None:
        raise Http404(_("There is no such payment among yours."))
    return payment


@login_required
def stripe_pay(request: HttpRequest, intent_id: str) -> HttpResponse:
    """Our page for a Stripe payment: Stripe.js mounts its Payment Element for the intent, so no card
    number ever reaches a form or a server of ours. A 3-D Secure challenge left open is resumed."""
    payment = _stripe_payment(request, intent_id)
    context: dict[str, object] = {"payment": payment, "order": payment.order, "client_secret": ""}
    # A failed attempt is read too: the page then says why (declined, or the bank's challenge failed).
    if payment.state in {PaymentState.PENDING, PaymentState.FAILED}:
        try:
            intent = StripeProvider().retrieve(intent_id)
        except ProviderError as error:
            log.warning("stripe pay page for %s: %s", intent_id, error)
            context["error"] = _("Stripe is not answering; reload this page in a moment.")
        else:
            failed = intent.get("last_payment_error")
            if failed:
                # Declined already: the saga fails this attempt, so another card is a new attempt
                # (from the order), never this intent again (it would be voided as out of order).
                context["declined"] = True
                context["not_authenticated"] = failed.get("code") == NOT_AUTHENTICATED
            elif payment.state == PaymentState.PENDING and intent.status in PAYABLE:
                context["client_secret"] = intent.client_secret
                context["challenge"] = intent.status == "requires_action"
    context.update(
        publishable_key=settings.STRIPE_PUBLISHABLE_KEY,
        stripe_js_url=settings.STRIPE_JS_URL,
        return_url=request.build_absolute_uri(payment.order.get_absolute_url()),
        card_url=reverse("stripe-card", args=[intent_id]) if stripe_page.card_fallback_mounted() else "",
    )
    response = render(request, "checkout/stripe_pay.html", context)
    response._csp_update = stripe_page.page_csp()  # type: ignore[attr-defined]  # read by django-csp
    return response


@require_POST
@login_required
def stripe_card(request: HttpRequest, intent_id: str) -> JsonResponse:
    """Fallback for localstripe's Stripe.js stand-in, which has no confirmPayment: the page posts the
    id of a token Stripe.js made (the card went from the browser to Stripe, never here), and we attach
    it and confirm the intent. Real Stripe.js confirms in the browser and never calls this."""
    payment = _stripe_payment(request, intent_id)
    token = request.POST.get("token", "")
    if not TOKEN_ID.fullmatch(token):
        detail = "token must be a Stripe token id (tok_...)."
        return JsonResponse(Error(error="bad_token", detail=detail).dump(), status=400)
    if payment.state != PaymentState.PENDING:
        return JsonResponse(
            Error(error="not_payable", detail="This payment is no longer open.").dump(), status=409
        )
    try:
        confirmed = StripeProvider().confirm_with_token(intent_id, token)
    except PermanentProviderError as error:
        return JsonResponse(Error(error="refused", detail=str(error)).dump(), status=400)
    except ProviderError:
        detail = "Stripe is not answering; try again."
        return JsonResponse(Error(error="unavailable", detail=detail).dump(), status=503)
    if confirmed.declined:
        return JsonResponse(Error(error="declined", detail=confirmed.declined).dump(), status=402)
    # A challenge: the buyer's bank asks them to authenticate (3-D Secure) before it authorises.
    return JsonResponse({"authorised": not confirmed.challenge, "challenge": confirmed.challenge})


def _webhook_body(request: HttpRequest) -> bytes:
    """The body, refused past MAX_WEBHOOK_BODY (past Django's own limit it would answer HTML)."""
    try:
        body = request.body
    except RequestDataTooBig:
        raise BadWebhook("The body is too large.") from None
    if len(body) > MAX_WEBHOOK_BODY:
        raise BadWebhook("The body is too large.")
    return body


@csrf_exempt  # RFC 8058: the mail provider POSTs it, with no session; the signed link is the credential
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    """A reminder's unsubscribe link: GET asks (link scanners must change nothing), POST (the page's
    button, or the mail provider's one click) forgets every reminder of the buyer not sent yet."""
    try:
        buyer_id = emails.unsubscribing_buyer(token)
    except signing.BadSignature:
        page = render(request, "checkout/unsubscribe.html", {"state": "bad"}, status=400)
        return page
    if request.method == "POST":
        cancelled = reminders.cancel_all_reminders(buyer_id=buyer_id)
        return render(request, "checkout/unsubscribe.html", {"state": "done", "cancelled": cancelled})
    return render(request, "checkout/unsubscribe.html", {"state": "ask"})


SETUP_ID = re.compile(r"seti_[A-Za-z0-9]{1,64}")


def _stripe_page(request: HttpRequest, template: str, context: dict[str, object]) -> HttpResponse:
    """A page that runs Stripe.js: it gets the pay page's additions to the shop's policy."""
    response = render(request, template, context)
    response._csp_update = stripe_page.page_csp()  # type: ignore[attr-defined]  # read by django-csp
    return response


@login_required
def saved_cards(request: HttpRequest) -> HttpResponse:
    """The buyer's saved cards, and a form (Stripe.js, a SetupIntent) to save one before a sale."""
    buyer = signed_in(request)
    returned = request.GET.get("setup_intent", "")
    if SETUP_ID.fullmatch(returned):
        # Back from a 3-D Secure redirect of Stripe.js's confirmSetup: save it as the form would (once).
        _save(request, returned)
        return redirect("saved-cards")
    context: dict[str, object] = {"cards": cards.cards_of(buyer_id=buyer), "client_secret": ""}
    if settings.PAYMENT_PROVIDER == cards.PROVIDER:
        try:
            context["client_secret"] = cards.begin_setup(buyer_id=buyer).client_secret
        except FloodgateError as error:
            context["error"] = error.detail
    context.update(publishable_key=settings.STRIPE_PUBLISHABLE_KEY, stripe_js_url=settings.STRIPE_JS_URL)
    return _stripe_page(request, "checkout/cards.html", context)


@require_POST
@login_required
def save_card(request: HttpRequest) -> HttpResponse:
    """Stripe.js confirmed a SetupIntent in the browser; the page posts its id (never the card)."""
    setup_id = request.POST.get("setup_intent", "")
    if not SETUP_ID.fullmatch(setup_id):
        return HttpResponse(_("That is not a card setup."), status=400, content_type="text/plain")
    _save(request, setup_id)
    return redirect("saved-cards")


def _save(request: HttpRequest, setup_id: str) -> None:
    try:
        saved = cards.save_card(buyer_id=signed_in(request), setup_id=setup_id)
    except FloodgateError as error:
        if error.status == 404:  # another buyer's setup, or none: unknown
            _not_found(error)
        messages.error(request, error.detail)
    else:
        messages.success(request, _("Card •••• %(last4)s saved.") % {"last4": saved.last4})


@require_POST
@login_required
def remove_card(request: HttpRequest, card_id: int) -> HttpResponse:
    try:
        cards.remove_card(buyer_id=signed_in(request), card_id=card_id)
    except FloodgateError as error:
        if error.status == 404:
            return _not_found(error)
        messages.error(request, error.detail)
    else:
        messages.success(request, _("The card is removed: it can no longer be charged here."))
    return redirect("saved-cards")


@require_POST
@login_required
def pay_saved(request: HttpRequest, hold_id: int) -> HttpResponse:
    """One press on the hold page: pay with a saved card. Authorised, the order page waits for the
    confirmation; a 3-D Secure challenge goes on on our pay page; a decline goes back to the normal form."""
    card_id = request.POST.get("card", "")
    if not card_id.isascii() or not card_id.isdigit() or len(card_id) > 18:
        return HttpResponse(_("That is not a saved card."), status=400, content_type="text/plain")
    try:
        pressed = cards.pay_with_saved_card(
            hold_id=hold_id, buyer_id=signed_in(request), card_id=int(card_id)
        )
    except FloodgateError as error:
        if error.status == 404:
            return _not_found(error)
        messages.error(request, error.detail)
        return redirect("hold", hold_id=hold_id)
    if pressed.outcome == "challenge":
        return redirect(pressed.payment.redirect_url)
    if pressed.outcome == "declined":
        messages.error(request, _("Your saved card was declined. Pay with another card."))
    return redirect(pressed.order.get_absolute_url())


def _not_found(error: FloodgateError) -> NoReturn:
    raise Http404(str(error.detail))


@require_GET
def push_worker(request: HttpRequest) -> HttpResponse:
    """The service worker that shows the shop's pushes: from the root, so its scope is every page."""
    response = render(request, "checkout/push_worker.js", content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = "no-cache"  # a new worker reaches the browsers at their next visit
    response["Service-Worker-Allowed"] = "/"
    return response
