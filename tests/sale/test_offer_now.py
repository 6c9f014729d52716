"""Units that come back to a waiting room's line are offered at once, by a real worker, not on
beat's next tick (no beat runs here: without the trigger nothing would be offered at all)."""

from __future__ import annotations

import time

import pytest

from checkout import refunds
from checkout.models import PaymentState
from holds import services as holds
from holds.models import Hold
from sale import offers
from tests.checkout.helpers import accepted, confirmed_order
from tests.conftest import Worker
from tests.factories import make_drop
from tests.sale.helpers import in_line, offer_of

pytestmark = pytest.mark.django_db(transaction=True)


def offered_within(drop_id: int, number: int, seconds: float) -> float:
    """Seconds until ticket `number` holds an offer; fails past `seconds`."""
    started = time.monotonic()
    while offer_of(drop_id, number) is None:
        assert time.monotonic() - started < seconds, f"ticket {number} got no offer in {seconds} s"
        time.sleep(0.01)
    return time.monotonic() - started


def test_a_released_unit_is_offered_to_the_next_ticket_right_after_the_commit(
    make_buyers, celery_worker: Worker
) -> None:
    drop = make_drop(slug="now", quantity=1, waiting_room=True, offer_seconds=60)
    by_number = in_line(drop.pk, make_buyers(3, prefix="now"))
    first = holds.reserve(drop=drop, buyer_id=by_number[1], quantity=1, idempotency_key="k").hold

    holds.release(hold_id=first.pk, buyer_id=by_number[1])

    offered_within(drop.pk, 2, seconds=10)
    assert offer_of(drop.pk, 3) is None and offers.offer_returns(drop) == 0  # one unit, one offer


def test_a_refunded_unit_put_back_on_sale_goes_to_the_line_at_once(
    make_buyers, celery_worker: Worker
) -> None:
    drop = make_drop(slug="back", quantity=1, waiting_room=True, per_buyer_limit=1, offer_seconds=60)
    in_line(drop.pk, make_buyers(2, prefix="back"))
    Hold.objects.filter(drop=drop).delete()
    order = confirmed_order(drop, quantity=1)  # bought by someone outside the line
    order.payments.update(state=PaymentState.CAPTURED)

    accepted(refunds.request_refund(order_id=order.pk, restock=True, by=None).refund)

    offered_within(drop.pk, 1, seconds=10)
