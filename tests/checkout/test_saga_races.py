"""A payment authorisation racing the hold sweeper: each hold ends sold or expired, never both."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial

import pytest
from django.db import connection, connections, transaction

from checkout import services as checkout
from checkout.models import Order, OrderState, OutboxMessage, Payment, PaymentState, WebhookEvent
from checkout.outbox import LATE_VOIDED_TOPIC
from config.celery import app as celery_app
from holds import services as holds
from holds.counts import invariant
from holds.models import Hold
from shop.models import Drop
from tests.checkout.helpers import Sale, pending_sales
from tests.concurrency import run_spread
from tests.factories import expire_in, make_drop

pytestmark = pytest.mark.django_db(transaction=True)

HOLDS = 40
ROUNDS = 5
SWEEPS = 20


@pytest.fixture(autouse=True)
def empty_queue_afterwards() -> Iterator[None]:
    """process_event enqueues settle and relay tasks; nobody consumes them here."""
    yield
    celery_app.control.purge()


def race(
    drop: Drop, sales: list[Sale], authorise: Callable[[Sale], object], seed: int
) -> list[object | BaseException]:
    """Every hold runs out 0.3 s from now while its authorisation and the sweeper hammer it: each
    job starts at its own moment in the next 0.6 s, so some land before the end and some after,
    however long the threads take to connect."""
    expire_in([s.hold for s in sales], 0.3)
    sweep = lambda: ("sweep", holds.reclaim_expired(drop_id=drop.pk))  # noqa: E731
    jobs: list[Callable[[], object]] = [partial(authorise, s) for s in sales]
    jobs += [sweep] * SWEEPS
    return run_spread(jobs, over=0.6, threads=16, seed=seed)


def outcome_of(sale: Sale) -> str:
    hold = Hold.objects.get(pk=sale.hold).state
    order = Order.objects.get(pk=sale.order)
    payment = Payment.objects.get(pk=sale.payment).state
    if (hold, order.state, order.refunded) == ("sold", OrderState.CONFIRMED, False) and payment in {
        PaymentState.CAPTURE_PENDING,
        PaymentState.CAPTURED,
    }:
        return "sold"
    if (hold, order.state, order.refunded) == ("expired", OrderState.FAILED, True) and payment in {
        PaymentState.VOID_PENDING,
        PaymentState.VOIDED,
    }:
        return "voided"
    return f"inconsistent: hold {hold}, order {order.state} refunded={order.refunded}, payment {payment}"


def confirm_ignoring_state(sale: Sale) -> str:
    """The control's broken confirm: sells the hold whatever its state or expiry.

    Its authorisation arrives within 100 ms, around the holds' expiry: on a quiet machine all
    forty would otherwise be done before any hold runs out, and no sweep could come first.
    """
    time.sleep(random.Random(sale.hold).uniform(0, 0.1))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE holds_hold SET state = 'sold', ended_at = now() WHERE id = %s", [sale.hold])
        Order.objects.filter(pk=sale.order).update(state=OrderState.CONFIRMED)
    return "confirmed"


def test_control_a_confirm_without_the_state_guard_sells_expired_units(make_buyers) -> None:
    drifts = []
    for round_number in range(4 * ROUNDS):  # stops at the first drift; a busy machine needs more tries
        drop = make_drop(quantity=HOLDS, buckets=4, per_buyer_limit=1)
        sales = pending_sales(drop, make_buyers(HOLDS, prefix=f"c{round_number}-"))

        results = race(drop, sales, confirm_ignoring_state, seed=round_number)

        assert not [r for r in results if isinstance(r, BaseException)]
        drifts.append(invariant(drop_id=drop.pk).drift)
        if drifts[-1]:
            break
    # a sweep credited units back that the unguarded confirm then sold: the race is visible
    assert any(drift < 0 for drift in drifts), drifts


@pytest.mark.parametrize(
    "database_path", [pytest.param("direct", marks=pytest.mark.slow), "pgbouncer"], indirect=True
)
def test_authorisations_racing_the_sweeper_end_each_hold_once(make_buyers, database_path: str) -> None:
    seen: Counter[str] = Counter()
    for round_number in range(ROUNDS):
        drop = make_drop(quantity=HOLDS, buckets=4, per_buyer_limit=1)
        sales = pending_sales(drop, make_buyers(HOLDS, prefix=f"r{round_number}-"))

        results = race(drop, sales, lambda s: checkout.process_event(event_pk=s.event), seed=round_number)

        assert not [r for r in results if isinstance(r, BaseException)], results
        # an authorisation that lost leaves its hold overdue but held until a sweep ends it
        holds.reclaim_expired(drop_id=drop.pk)
        outcomes = Counter(outcome_of(s) for s in sales)
        assert set(outcomes) <= {"sold", "voided"}, outcomes
        decided = Counter(r for r in results if isinstance(r, str))
        assert (decided["confirmed"], decided["too_late_voiding"]) == (outcomes["sold"], outcomes["voided"])
        assert not WebhookEvent.objects.filter(pk__in=[s.event for s in sales], processed_at=None).exists()
        announced = OutboxMessage.objects.filter(payload__drop=drop.pk)
        assert announced.exclude(topic=LATE_VOIDED_TOPIC).count() == 2 * outcomes["sold"]
        assert announced.filter(topic=LATE_VOIDED_TOPIC).count() == outcomes["voided"]  # each told once
        numbers = invariant(drop_id=drop.pk)
        assert (numbers.sold, numbers.held, numbers.available, numbers.drift) == (
            outcomes["sold"],
            0,
            HOLDS - outcomes["sold"],
            0,
        )
        seen.update(outcomes)
    # both sides won some of the races, so the race really ran
    assert seen["sold"] > 0 and seen["voided"] > 0, seen


def test_an_authorisation_that_waited_on_a_lock_does_not_sell_a_hold_that_expired_meanwhile(
    make_buyers,
) -> None:
    drop = make_drop(quantity=2)
    (sale,) = pending_sales(drop, make_buyers(1, prefix="w"))
    expire_in([sale.hold], 0.5)
    outcome: list[str] = []

    def authorise() -> None:
        try:
            outcome.append(checkout.process_event(event_pk=sale.event))
        finally:
            connections.close_all()

    # a duplicate delivery of the same event holds its row while this one waits for it
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT id FROM checkout_webhookevent WHERE id = %s FOR UPDATE", [sale.event])
        waiting = threading.Thread(target=authorise)
        waiting.start()
        time.sleep(1)  # the hold runs out while the authorisation waits
    waiting.join(30)

    assert outcome == ["too_late_voiding"]
    assert Hold.objects.get(pk=sale.hold).state == "held"  # overdue, left for the sweeper
    assert invariant(drop_id=drop.pk).sold == 0
