"""JSON API of checkout: start paying a hold, list orders, cancel one not yet charged."""

from __future__ import annotations

import re

from django.http import HttpRequest, JsonResponse

from checkout import answers, refunds, selectors, services
from checkout.models import Order
from core.api import api, signed_in
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
        raise NotFound("There is no such order among yours.")
    return JsonResponse(selectors.order_json(found))


@api({"POST"}, login=True)
def cancel(request: HttpRequest, order_id: str) -> JsonResponse:
    """The buyer cancels before the money is taken; 409 not_cancellable after."""
    found = refunds.cancel_order(
        order_id=int(order_id) if ORDER_ID.fullmatch(order_id) else 0, buyer_id=signed_in(request)
    )
    return JsonResponse(selectors.order_json(found))
