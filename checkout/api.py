"""JSON API of checkout: paying a hold, orders, cancelling one not charged, reminders, push subscriptions."""

from __future__ import annotations

import re

from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.utils.translation import gettext_lazy
from ninja import Router

from checkout import answers, exchange, push, refunds, reminders, selectors, services
from checkout.models import Order
from core.api import Id, json_body, operation, signed_in
from core.errors import NotFound
from holds import selectors as holds
from shop.models import Drop

ORDER_ID = re.compile(r"[0-9]{1,18}")  # ASCII digits only: "²".isdigit() is True
NOT_YOURS = "Not yours or none"
router = Router()


def _order_pk(order_id: str) -> int:
    return int(order_id) if ORDER_ID.fullmatch(order_id) else 0


@operation(
    router,
    "POST",
    "/holds/{id}/payment",
    "Start paying a hold: extends it once; send the buyer to redirect_url",
    {
        202: ("The payment and its order", answers.PaymentStarted),
        404: NOT_YOURS,
        409: "hold_not_active: expired or released; address_required: the product ships",
        503: "busy, payment_unavailable or payment_opening; see Retry-After",
    },
    login=True,
    url_name="api-payment",
)
def start_payment(request: HttpRequest, id: Id) -> JsonResponse:
    hold = holds.hold_of_buyer(hold_id=id, buyer_id=signed_in(request))
    started = services.start_payment(hold_id=hold.pk, buyer_id=signed_in(request))
    body = answers.PaymentStarted(
        payment=started.payment.pk,
        state=started.payment.state,
        redirect_url=started.payment.redirect_url,
        order=selectors.order_answer(started.order),
    )
    return JsonResponse(body.dump(), status=202)


@operation(
    router,
    "GET",
    "/orders",
    "Your orders, newest first",
    {200: ("Your orders", answers.OrderList)},
    login=True,
    url_name="api-orders",
)
def orders(request: HttpRequest) -> JsonResponse:
    return JsonResponse(
        answers.OrderList(
            orders=[selectors.order_answer(o) for o in selectors.orders_of(buyer_id=signed_in(request))]
        ).dump()
    )


@operation(
    router,
    "GET",
    "/orders/{id}",
    "One of your orders",
    {200: ("The order", answers.Order), 404: NOT_YOURS},
    login=True,
    url_name="api-order",
)
def order(request: HttpRequest, id: Id) -> JsonResponse:
    found = (
        Order.objects.select_related("drop", "hold__variant")
        .filter(pk=_order_pk(id), buyer_id=signed_in(request))
        .first()
    )
    if found is None:
        raise NotFound(gettext_lazy("There is no such order among yours."))
    return JsonResponse(selectors.order_json(found))


@operation(
    router,
    "POST",
    "/orders/{id}/cancel",
    "Cancel your order before the money is taken: its units go back on sale, you are not charged",
    {
        200: ("The order, cancelled (again: the same answer)", answers.Order),
        403: "csrf_failed",
        404: NOT_YOURS,
        409: "not_cancellable: the payment was taken (ask for a refund), or nothing to cancel",
    },
    login=True,
    url_name="api-order-cancel",
)
def cancel(request: HttpRequest, id: Id) -> JsonResponse:
    """The buyer cancels before the money is taken; 409 not_cancellable after."""
    found = refunds.cancel_order(order_id=_order_pk(id), buyer_id=signed_in(request))
    return JsonResponse(selectors.order_json(found))


@operation(
    router,
    "GET",
    "/orders/{id}/exchange",
    "Your order's units on the drop's face-value exchange",
    {200: ("The listings", answers.OrderExchange), 404: NOT_YOURS},
    login=True,
    url_name="api-order-exchange",
)
def order_exchange(request: HttpRequest, id: Id) -> JsonResponse:
    found = Order.objects.select_related("drop").filter(pk=_order_pk(id), buyer_id=signed_in(request)).first()
    if found is None:
        raise NotFound(gettext_lazy("There is no such order among yours."))
    return JsonResponse(selectors.exchange_answer(found, exchange.listings_of(found)).dump())


@operation(
    router,
    "POST",
    "/orders/{id}/exchange",
    "Put units of your order on the exchange at the price you paid (or less): each goes to the "
    "next buyer in line, and you are refunded (less the shop's fee) once that buyer has paid",
    {
        201: ("The order's listings", answers.OrderExchange),
        403: "csrf_failed",
        404: NOT_YOURS,
        409: "exchange_closed (none, not open yet, paused or closed), or not_listable (not paid and "
        "captured, or every unit refunded or listed already)",
        422: "invalid (quantity beyond what you may list, price_minor above what you paid)",
    },
    login=True,
    body=answers.ExchangeBody,
    url_name="api-order-exchange",
)
def list_on_exchange(request: HttpRequest, id: Id) -> JsonResponse:
    body = json_body(request)
    listed = exchange.list_units(
        order_id=_order_pk(id),
        buyer_id=signed_in(request),
        quantity=1 if body.get("quantity") is None else body["quantity"],
        price_minor=body.get("price_minor"),
    )
    return JsonResponse(selectors.exchange_answer(listed.order, listed.listings).dump(), status=201)


@operation(
    router,
    "DELETE",
    "/orders/{id}/exchange",
    "Take back your units on the exchange that nobody has been offered yet",
    {
        200: ("The order's listings", answers.OrderExchange),
        403: "csrf_failed",
        404: NOT_YOURS,
        409: "not_listable: none of the order's units is waiting on the exchange",
    },
    login=True,
    url_name="api-order-exchange",
)
def withdraw_from_exchange(request: HttpRequest, id: Id) -> JsonResponse:
    listed = exchange.withdraw(order_id=_order_pk(id), buyer_id=signed_in(request))
    return JsonResponse(selectors.exchange_answer(listed.order, listed.listings).dump())


@operation(
    router,
    "POST",
    "/drops/{slug:slug}/reminder",
    "Ask to be e-mailed when the drop opens (before its start); asking again keeps one reminder",
    {
        201: ("Asked", answers.DropReminder),
        200: ("Asked already: the same reminder", answers.DropReminder),
        403: "forbidden: an account made for a rehearsal; or csrf_failed",
        404: "No such drop",
        409: "not_scheduled: the drop has started or ended, or its waiting room is open (join it)",
    },
    login=True,
    url_name="api-reminder",
)
def ask_reminder(request: HttpRequest, slug: str) -> JsonResponse:
    """The buyer's "tell me when it opens": 201, or 200 asked already; 409 not_scheduled once its
    reminders go (sends_at) or later."""
    drop = reminders.drop_for_reminder(slug=slug)
    new = reminders.ask_reminder(drop=drop, buyer_id=signed_in(request)).new
    return _reminder(request, drop, status=201 if new else 200)


@operation(
    router,
    "GET",
    "/drops/{slug:slug}/reminder",
    "Whether you asked for a reminder of this drop, and whether it went out",
    {200: ("Your reminder (reminded false: none)", answers.DropReminder), 404: "No such drop"},
    login=True,
    url_name="api-reminder",
)
def reminder(request: HttpRequest, slug: str) -> JsonResponse:
    return _reminder(request, reminders.drop_for_reminder(slug=slug))


@operation(
    router,
    "DELETE",
    "/drops/{slug:slug}/reminder",
    "Forget your reminder if it has not gone out (none to forget: the same answer)",
    {
        200: ("Your reminder now (reminded true only if it was sent)", answers.DropReminder),
        404: "No such drop",
    },
    login=True,
    url_name="api-reminder",
)
def forget_reminder(request: HttpRequest, slug: str) -> JsonResponse:
    drop = reminders.drop_for_reminder(slug=slug)
    reminders.cancel_reminder(drop=drop, buyer_id=signed_in(request))
    return _reminder(request, drop)


def _reminder(request: HttpRequest, drop: Drop, *, status: int = 200) -> JsonResponse:
    found = reminders.reminder_of(drop_id=drop.pk, buyer_id=signed_in(request))
    body = answers.DropReminder(
        drop=drop.slug,
        reminded=found is not None,
        sent_at=found.sent_at if found is not None else None,
        starts_at=drop.starts_at,
        sends_at=reminders.reminded_at(drop),
        calendar=reverse("drop-calendar", args=[drop.slug]),
    )
    return JsonResponse(body.dump(), status=status)


@operation(
    router,
    "POST",
    "/push/subscription",
    "Get a push on this browser when it is your turn (the browser's PushSubscription.toJSON())",
    {
        201: ("Subscribed", answers.PushSubscribed),
        200: ("Subscribed already: the same endpoint, its keys renewed", answers.PushSubscribed),
        403: "csrf_failed",
        404: "push_off: the shop sends no pushes",
        422: "invalid: not a subscription (endpoint, keys.p256dh, keys.auth)",
    },
    login=True,
    body=answers.PushSubscriptionBody,
    url_name="api-push-subscription",
)
def subscribe(request: HttpRequest) -> JsonResponse:
    """The waiting page's "Tell me on this device": 201, or 200 known already; 422 for anything that
    is not a subscription, 404 push_off."""
    new = push.subscribe(buyer_id=signed_in(request), body=json_body(request)).new
    return JsonResponse(answers.PushSubscribed(subscribed=True).dump(), status=201 if new else 200)


@operation(
    router,
    "DELETE",
    "/push/subscription",
    "No more pushes to this browser (an endpoint not yours or unknown: the same answer)",
    {
        200: ("Unsubscribed (subscribed false)", answers.PushSubscribed),
        403: "csrf_failed",
        422: "invalid: no endpoint",
    },
    login=True,
    body=answers.PushSubscriptionBody,
    url_name="api-push-subscription",
)
def unsubscribe(request: HttpRequest) -> JsonResponse:
    push.unsubscribe(buyer_id=signed_in(request), body=json_body(request))
    return JsonResponse(answers.PushSubscribed(subscribed=False).dump())
