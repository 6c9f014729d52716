"""Checkout pages and the provider webhook."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from checkout import selectors, services
from checkout.providers import get_provider
from checkout.providers.base import BadWebhook
from checkout.tasks import process_webhook_event
from core.errors import FloodgateError
from holds.services import effective_state
from shop import selectors as catalogue

MAX_WEBHOOK_BODY = 64 * 1024


@require_POST
@login_required
def pay(request: HttpRequest, hold_id: int) -> HttpResponse:
    try:
        started = services.start_payment(hold_id=hold_id, buyer_id=request.user.pk)
    except FloodgateError as error:
        messages.error(request, error.detail)
        return redirect("hold", hold_id=hold_id)
    if not started.payment.redirect_url.startswith(settings.PAYMENT_PROVIDER_PUBLIC_PREFIXES):
        messages.error(request, "The payment page could not be opened; try again.")
        return redirect("hold", hold_id=hold_id)
    return redirect(started.payment.redirect_url)


@login_required
def order(request: HttpRequest, order_id: int) -> HttpResponse:
    found = selectors.order_of_buyer(order_id=order_id, buyer_id=request.user.pk)
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
    }
    return render(request, "checkout/order.html", context)


@login_required
def orders(request: HttpRequest) -> HttpResponse:
    return render(request, "checkout/orders.html", {"orders": selectors.orders_of(buyer_id=request.user.pk)})


@csrf_exempt
@require_POST
def webhook(request: HttpRequest, provider: str) -> JsonResponse:
    """Verify, record once, hand to a task. Anything wrong is a 400 and changes nothing."""
    try:
        adapter = get_provider(provider)
    except KeyError:
        raise Http404(f"No payment provider called {provider!r}.") from None
    body = request.body[: MAX_WEBHOOK_BODY + 1]
    try:
        if len(body) > MAX_WEBHOOK_BODY:
            raise BadWebhook("The body is too large.")
        event = adapter.parse_webhook(body=body, headers=dict(request.headers))
    except BadWebhook as error:
        return JsonResponse({"error": "bad_webhook", "detail": str(error)}, status=400)
    event_pk = services.record_webhook(provider_name=provider, event=event, payload=json.loads(body))
    if event_pk is not None:
        process_webhook_event.delay(event_pk)
    return JsonResponse({"received": event.event_id})
