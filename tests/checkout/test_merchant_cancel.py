"""The shop cancels an order whose money is not taken: voided, units back, the buyer told why."""

from __future__ import annotations

import pytest
from django.core import mail
from django.test import Client

from checkout import outbox, refunds
from checkout.models import Order, Payment, PaymentState
from core.errors import InvalidInput
from holds.counts import invariant
from holds.models import Hold
from shop import languages
from tests.checkout.helpers import confirmed_order, pending_sales
from tests.factories import make_buyer, make_drop, staff

pytestmark = pytest.mark.django_db


def merchant_client() -> Client:
    client = Client()
    client.force_login(staff("mira", "Merchants"))
    return client


def test_the_merchant_cancels_an_uncaptured_order_the_units_return_and_the_buyer_reads_why(
    roles: None,
) -> None:
    drop = make_drop(slug="mislabelled", quantity=3)
    order = confirmed_order(drop, quantity=2, captured=False)  # authorised, capture still to come
    languages.remember(order.buyer_id, "de")
    outbox.relay_outbox()
    mail.outbox.clear()
    client = merchant_client()

    page = client.get(f"/admin/checkout/order/{order.pk}/change/").content.decode()
    assert 'id="cancel-order"' in page
    done = client.post(
        f"/admin/checkout/order/{order.pk}/cancel/", {"reason": "Die Größe war falsch etikettiert."}
    )

    assert done.status_code == 302
    assert Order.objects.get(pk=order.pk).state == "cancelled"
    assert Payment.objects.get(order=order).state in {PaymentState.VOID_PENDING, PaymentState.VOIDED}
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.sold, numbers.drift) == (3, 0, 0)
    outbox.relay_outbox()
    (told,) = mail.outbox
    assert "storniert" in told.subject
    assert "Grund: Die Größe war falsch etikettiert." in told.body and "Sie haben" not in told.body


def test_a_pending_order_cancelled_by_the_shop_releases_its_hold() -> None:
    drop = make_drop(slug="pending-cancel", quantity=1)
    (sale,) = pending_sales(drop, [make_buyer().pk])  # paying: the authorisation not applied yet

    assert refunds.cancel_order(order_id=sale.order, buyer_id=None, reason="").state == "cancelled"
    assert Hold.objects.get(pk=sale.hold).state == "released"
    assert Payment.objects.get(pk=sale.payment).state == PaymentState.FAILED
    assert invariant(drop_id=drop.pk).available == 1


def test_a_captured_order_is_not_cancelled_and_others_may_not_try(roles: None) -> None:
    drop = make_drop(slug="taken", quantity=2)
    order = confirmed_order(drop, quantity=1, captured=True)
    client = merchant_client()
    assert 'id="cancel-order"' not in client.get(f"/admin/checkout/order/{order.pk}/change/").content.decode()

    page = client.post(f"/admin/checkout/order/{order.pk}/cancel/", {"reason": "no"}).content.decode()
    assert "The payment has been taken already" in page
    on_call = Client()
    on_call.force_login(staff("oscar", "On-call"))
    assert on_call.post(f"/admin/checkout/order/{order.pk}/cancel/", {"reason": "no"}).status_code == 403
    for garbage in ("x" * 301, "bad\x00reason", ""):
        answer = client.post(f"/admin/checkout/order/{order.pk}/cancel/", {"reason": garbage})
        assert answer.status_code == 200
    assert client.post(f"/admin/checkout/order/{10**12}/cancel/", {"reason": "x"}).status_code == 404

    assert Order.objects.get(pk=order.pk).state == "confirmed"
    assert invariant(drop_id=drop.pk).sold == 1
    with pytest.raises(InvalidInput):
        refunds.cancel_order(order_id=order.pk, buyer_id=None, reason="x" * 301)
