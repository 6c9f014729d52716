"""JSON API of checkout: paying a hold, orders, cancelling one not charged, reminders, push subscriptions."""

from __future__ import annotations

import re

from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy

from checkout import answers, exchange, push, refunds, reminders, selectors, services
from checkout.models import Order
from core.api import api, json_body, signed_in
from core.errors import NotFound
from holds import selectors as holds

ORDER_ID = re.compile(r"[0-9]{1,18}")  # ASCII digits only: "²".isdigit() is True


@api({"POST"}, login=True)
def start_payment(request: HttpRequest, hold_id: str) -> JsonResponse:
    hold = holds.hold_of_buyer(hold_id=hold_id, buyer_id=signed_in(request))
    started = services.start_payment(hold_id=hold.pk, buyer_id=signed_in(request))
    body = answers.PaymentStarted(
        payment=started.payment.pk,
        state=started.payment.state,
        redirect_url=started.payment.redirect_url,
        order=selectors.order_answer(started.order),
    )
    return JsonResponse(body.dump(), status=202)


@api({"GET"}, login=True)
def orders(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        answers.OrderList(
            orders=[selectors.order_answer(o) for o in selectors.orders_of(buyer_id=signed_in(request))]
        ).dump()
    )


@api({"GET"}, login=True)
def order(request: HttpRequest, order_id: str) -> JsonResponse:
    found = (
        Order.objects.select_related("drop", "hold__variant")
        .filter(pk=int(order_id) if ORDER_ID.fullmatch(order_id) else 0, buyer_id=signed_in(request))
        .first()
    )
    if found is None:
        raise NotFound(gettext_lazy("There is no such order among yours."))
    return JsonResponse(selectors.order_json(found))


@api({"POST"}, login=True)
def cancel(request: HttpRequest, order_id: str) -> JsonResponse:
    """The buyer cancels before the money is taken; 409 not_cancellable after."""
    found = refunds.cancel_order(
        order_id=int(order_id) if ORDER_ID.fullmatch(order_id) else 0, buyer_id=signed_in(request)
    )
    return JsonResponse(selectors.order_json(found))


@api({"GET", "POST", "DELETE"}, login=True)
def order_exchange(request: HttpRequest, order_id: str) -> JsonResponse:
    """The buyer's units on the drop's face-value exchange: POST lists (201), DELETE takes back those
    not offered yet, GET reads them."""
    pk = int(order_id) if ORDER_ID.fullmatch(order_id) else 0
    buyer_id = signed_in(request)
    if request.method == "POST":
        body = json_body(request)
        listed = exchange.list_units(
            order_id=pk,
            buyer_id=buyer_id,
            quantity=1 if body.get("quantity") is None else body["quantity"],
            price_minor=body.get("price_minor"),
        )
        return JsonResponse(selectors.exchange_answer(listed.order, listed.listings).dump(), status=201)
    if request.method == "DELETE":
        listed = exchange.withdraw(order_id=pk, buyer_id=buyer_id)
        return JsonResponse(selectors.exchange_answer(listed.order, listed.listings).dump())
    found = Order.objects.select_related("drop").filter(pk=pk, buyer_id=buyer_id).first()
    if found is None:
        raise NotFound(gettext_lazy("There is no such order among yours."))
    return JsonResponse(selectors.exchange_answer(found, exchange.listings_of(found)).dump())


@api({"GET", "POST", "DELETE"}, login=True)
def reminder(request: HttpRequest, slug: str) -> JsonResponse:
    """The buyer's "tell me when it opens": POST asks (201, or 200 asked already), DELETE forgets an
    unsent one, GET reads it; 409 not_scheduled on POST once its reminders go (sends_at) or later."""
    drop = reminders.drop_for_reminder(slug=slug)
    buyer_id = signed_in(request)
    status = 200
    if request.method == "POST":
        status = 201 if reminders.ask_reminder(drop=drop, buyer_id=buyer_id).new else 200
    elif request.method == "DELETE":
        reminders.cancel_reminder(drop=drop, buyer_id=buyer_id)
    found = reminders.reminder_of(drop_id=drop.pk, buyer_id=buyer_id)
    body = answers.DropReminder(
        drop=drop.slug,
        reminded=found is not None,
        sent_at=found.sent_at if found is not None else None,
        starts_at=drop.starts_at,
        sends_at=reminders.reminded_at(drop),
        calendar=reverse("drop-calendar", args=[drop.slug]),
    )
    return JsonResponse(body.dump(), status=status)


@api({"POST", "DELETE"}, login=True)
def push_subscription(request: HttpRequest) -> JsonResponse:
    """The waiting page's "Tell me on this device": POST stores the browser's subscription (201, or
    200 known already), DELETE forgets it; 422 for anything that is not one, 404 push_off."""
    buyer_id, body = signed_in(request), json_body(request)
    if request.method == "DELETE":
        push.unsubscribe(buyer_id=buyer_id, body=body)
        return JsonResponse(answers.PushSubscribed(subscribed=False).dump())
    new = push.subscribe(buyer_id=buyer_id, body=body).new
    return JsonResponse(answers.PushSubscribed(subscribed=True).dump(), status=201 if new else 200)
