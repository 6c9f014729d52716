"""Checkout pages and the provider webhook."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from catalogue import selectors as catalogue
from checkout import refunds, selectors, services
from checkout.models import EVENT_ID_MAX
from checkout.providers import get_provider
from checkout.providers.base import BadWebhook
from checkout.tasks import process_webhook_event
from core.api import error_response, signed_in
from core.errors import FloodgateError
from core.text import storable_json
from holds.services import effective_state

MAX_WEBHOOK_BODY = 64 * 1024


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
        raise Http404("There is no such order among yours.")
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
    }
    return render(request, "checkout/order.html", context)


@require_POST
@login_required
def cancel(request: HttpRequest, order_id: int) -> HttpResponse:
    try:
        refunds.cancel_order(order_id=order_id, buyer_id=signed_in(request))
    except FloodgateError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, "Your order is cancelled: you are not charged.")
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
        return JsonResponse({"error": "bad_webhook", "detail": str(error)}, status=400)
    try:
        event_pk = services.record_webhook(provider_name=provider, event=event, payload=payload)
    except FloodgateError as error:  # the same event id with another body: the first stays
        return error_response(error)
    if event_pk is not None:
        process_webhook_event.delay(event_pk)
    return JsonResponse({"received": event.event_id})


def _webhook_body(request: HttpRequest) -> bytes:
    """The body, refused past MAX_WEBHOOK_BODY (past Django's own limit it would answer HTML)."""
    try:
        body = request.body
    except RequestDataTooBig:
        raise BadWebhook("The body is too large.") from None
    if len(body) > MAX_WEBHOOK_BODY:
        raise BadWebhook("The body is too large.")
    return body
