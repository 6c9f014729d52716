"""Refunds and cancellations: the bounds, the stock, the races, each decided once."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import IntegrityError, connection, transaction
from django.test import Client

from checkout import refunds, services
from checkout.models import Order, OrderState, Payment, PaymentState, Refund
from checkout.providers.base import WebhookEvent as ProviderEvent
from core.errors import IdempotencyKeyReused, InvalidInput, LimitReached, NotFound
from holds import services as holds
from holds.counts import invariant
from holds.models import Hold
from inventory.models import StockBucket, Unit
from tests.checkout.helpers import accepted, confirmed_order
from tests.concurrency import run_concurrently
from tests.factories import make_buyer, make_drop
from tests.harness import lock_waits

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("mode", ["buckets", "units"])
@pytest.mark.parametrize("waiting_room", [False, True])
def test_a_refund_put_back_on_sale_is_available_again_and_the_invariant_holds(
    mode: str, waiting_room: bool
) -> None:
    drop = make_drop(quantity=5, mode=mode, per_buyer_limit=3, waiting_room=waiting_room)
    order = confirmed_order(drop, quantity=3)

    asked = refunds.request_refund(order_id=order.pk, quantity=2, restock=True, by=None)
    assert accepted(asked.refund) == "succeeded"

    numbers = invariant(drop_id=drop.pk)
    assert (numbers.sold, numbers.refunded, numbers.available, numbers.drift) == (1, 0, 4, 0)
    order.refresh_from_db()
    assert (order.state, order.refunded_quantity, order.refunded_minor) == ("confirmed", 2, 2000)
    if mode == "units":
        assert Unit.objects.filter(drop=drop, state="sold").count() == 1
        # the two never sold stay available; the two back go to the line in a waiting-room drop
        back = "returned" if waiting_room else "available"
        assert Unit.objects.filter(drop=drop, state=back).exclude(label__in=["4", "5"]).count() == 2
    else:
        bucket = StockBucket.objects.get(drop=drop)
        assert (bucket.available, bucket.returned) == ((2, 2) if waiting_room else (4, 0))


@pytest.mark.parametrize("mode", ["buckets", "units"])
def test_units_refunded_and_kept_off_sale_count_apart(mode: str) -> None:
    drop = make_drop(quantity=4, mode=mode, per_buyer_limit=2)
    order = confirmed_order(drop, quantity=2)

    accepted(refunds.request_refund(order_id=order.pk, quantity=1, restock=False, by=None).refund)
    accepted(refunds.request_refund(order_id=order.pk, restock=False, by=None).refund)  # the rest

    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.sold, numbers.refunded, numbers.drift) == (2, 0, 2, 0)
    order.refresh_from_db()
    assert order.state == "refunded" and order.refunded_minor == order.amount_minor


def test_the_shares_of_a_refund_in_parts_add_up_to_what_was_paid() -> None:
    drop = make_drop(quantity=3, per_buyer_limit=3)
    order = confirmed_order(drop, quantity=3)
    Order.objects.filter(pk=order.pk).update(amount_minor=1000)  # 333.33 a unit

    parts = [refunds.request_refund(order_id=order.pk, quantity=1, by=None).refund for _ in range(3)]

    assert [p.amount_minor for p in parts] == [333, 333, 334]


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"quantity": 0}, "between 1 and 2"),
        ({"quantity": -1}, "between 1 and 2"),
        ({"quantity": 3}, "between 1 and 2"),
        ({"quantity": "2"}, "whole number"),
        ({"quantity": True}, "whole number"),
        ({"amount_minor": -5}, "between 1 and 2000"),
        ({"amount_minor": 2001}, "between 1 and 2000"),
        ({"amount_minor": 1.5}, "whole number"),
        ({"restock": "yes"}, "true or false"),
        ({"reason": "a\x00b"}, "reason"),
        ({"reason": "x" * 301}, "reason"),
    ],
)
def test_bad_refund_input_is_refused_and_changes_nothing(fields: dict[str, object], words: str) -> None:
    order = confirmed_order(make_drop(quantity=2, per_buyer_limit=2))

    with pytest.raises(InvalidInput, match=words):
        refunds.request_refund(order_id=order.pk, by=None, **fields)  # type: ignore[arg-type]

    assert not Refund.objects.exists()
    assert Order.objects.get(pk=order.pk).refunded_quantity == 0


def test_an_order_not_paid_or_not_captured_is_not_refunded() -> None:
    drop = make_drop(quantity=3, per_buyer_limit=1)
    capturing = confirmed_order(drop, quantity=1, captured=False)
    voided = confirmed_order(drop, quantity=1)
    Order.objects.filter(pk=voided.pk).update(state="failed", failure_reason="too late", refunded=True)

    with pytest.raises(refunds.CapturePending):
        refunds.request_refund(order_id=capturing.pk, by=None)
    with pytest.raises(refunds.NotRefundable, match="never paid"):
        refunds.request_refund(order_id=voided.pk, by=None)
    with pytest.raises(NotFound):
        refunds.request_refund(order_id=10**12, by=None)
    assert not Refund.objects.exists()


def test_the_same_idempotency_key_is_the_same_refund_and_another_request_under_it_is_refused() -> None:
    order = confirmed_order(make_drop(quantity=2, per_buyer_limit=2))

    first = refunds.request_refund(order_id=order.pk, quantity=1, by=None, request_key="r-1")
    again = refunds.request_refund(order_id=order.pk, quantity=1, by=None, request_key="r-1")
    with pytest.raises(IdempotencyKeyReused):
        refunds.request_refund(order_id=order.pk, quantity=2, by=None, request_key="r-1")

    assert first.created and not again.created and again.refund.pk == first.refund.pk
    assert Order.objects.get(pk=order.pk).refunded_quantity == 1


def test_the_database_refuses_more_refunded_than_paid_whatever_the_code_does() -> None:
    order = confirmed_order(make_drop(quantity=2, per_buyer_limit=2))

    with pytest.raises(IntegrityError), transaction.atomic():
        Order.objects.filter(pk=order.pk).update(refunded_minor=order.amount_minor + 1)
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE holds_hold SET refunded = quantity + 1 WHERE id = %s", [order.hold_id])


def test_a_duplicate_whole_refund_from_many_threads_is_decided_once() -> None:
    # given a paid order of 2 and eight merchants clicking "refund all" at once
    order = confirmed_order(make_drop(quantity=2, per_buyer_limit=2))

    results = run_concurrently(
        [lambda: refunds.request_refund(order_id=order.pk, restock=True, by=None) for _ in range(8)],
        threads=8,
    )

    made = [r for r in results if isinstance(r, refunds.Asked)]
    refused = [r for r in results if isinstance(r, refunds.NotRefundable)]
    assert len(made) == 1 and len(refused) == 7, results
    assert Refund.objects.count() == 1
    assert Order.objects.get(pk=order.pk).refunded_quantity == 2


def test_partial_refunds_racing_never_exceed_the_units_paid_for() -> None:
    order = confirmed_order(make_drop(quantity=3, per_buyer_limit=3), quantity=3)

    results = run_concurrently(
        [lambda: refunds.request_refund(order_id=order.pk, quantity=1, by=None) for _ in range(10)],
        threads=10,
    )

    assert sum(isinstance(r, refunds.Asked) for r in results) == 3
    assert sum(r.quantity for r in Refund.objects.all()) == 3
    assert Order.objects.get(pk=order.pk).refunded_minor == order.amount_minor


def test_recording_the_providers_answer_twice_counts_the_units_once() -> None:
    drop = make_drop(quantity=2, per_buyer_limit=2)
    order = confirmed_order(drop)
    refund = refunds.request_refund(order_id=order.pk, restock=True, by=None).refund

    results = run_concurrently([lambda: accepted(refund) for _ in range(4)], threads=4)

    assert sorted(results) == ["already_recorded"] * 3 + ["succeeded"]  # type: ignore[type-var]
    assert Hold.objects.get(pk=order.hold_id).restocked == 2
    assert invariant(drop_id=drop.pk).available == 2


def test_a_refused_refund_gives_its_units_back_to_the_refundable() -> None:
    order = confirmed_order(make_drop(quantity=2, per_buyer_limit=2))
    refund = refunds.request_refund(order_id=order.pk, restock=True, by=None).refund

    assert refunds._record(refund, "failed", "", "the card is closed") == "failed"

    order.refresh_from_db()
    assert (order.refunded_quantity, order.refunded_minor, order.state) == (0, 0, "confirmed")
    assert Hold.objects.get(pk=order.hold_id).refunded == 0
    assert refunds.request_refund(order_id=order.pk, by=None).refund.quantity == 2


def test_a_pending_refund_is_confirmed_by_its_webhook_once() -> None:
    order = confirmed_order(make_drop(quantity=1, per_buyer_limit=1), quantity=1)
    refund = refunds.request_refund(order_id=order.pk, by=None).refund
    refunds._record(refund, "pending", "re_abc", "")
    payment = Payment.objects.get(order=order)

    def event(n: int) -> int | None:
        facts = ProviderEvent(
            event_id=f"evt_refund_{n}",
            type="refund.succeeded",
            session_id=str(payment.session_id),
            reference=refund.key,
            amount_minor=refund.amount_minor,
            currency="EUR",
            refund_id="re_abc",
        )
        return services.record_webhook(provider_name="simulated", event=facts, payload={"id": facts.event_id})

    first, late_duplicate = event(1), event(2)
    assert first is not None and late_duplicate is not None
    assert services.process_event(event_pk=first) == "refund_succeeded"
    assert services.process_event(event_pk=late_duplicate) == "refund_already_succeeded"
    assert services.process_event(event_pk=first) == "already_processed"
    assert Order.objects.get(pk=order.pk).state == "refunded"


def test_a_buyer_cancels_while_paying_and_a_late_authorisation_is_voided() -> None:
    drop = make_drop(quantity=2, per_buyer_limit=2)
    buyer = make_buyer()
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=2, idempotency_key="k").hold
    order = Order.objects.create(
        hold=hold, buyer=buyer, drop=drop, quantity=2, amount_minor=2000, currency="EUR"
    )
    payment = Payment.objects.create(
        order=order,
        provider="simulated",
        session_id="ses_c",
        state="pending",
        amount_minor=2000,
        currency="EUR",
    )

    with pytest.raises(NotFound):
        refunds.cancel_order(order_id=order.pk, buyer_id=make_buyer().pk)
    assert refunds.cancel_order(order_id=order.pk, buyer_id=buyer.pk).state == "cancelled"

    assert invariant(drop_id=drop.pk).available == 2
    late = ProviderEvent(
        event_id="evt_late",
        type="payment.authorized",
        session_id="ses_c",
        reference=str(payment.reference),
        amount_minor=2000,
        currency="EUR",
    )
    event_pk = services.record_webhook(provider_name="simulated", event=late, payload={"id": "evt_late"})
    assert event_pk is not None
    assert services.process_event(event_pk=event_pk) == "declined_then_authorised_voiding"
    assert Payment.objects.get(pk=payment.pk).state == "void_pending"
    assert Order.objects.get(pk=order.pk).state == "cancelled"


def test_a_confirmed_order_not_captured_yet_is_cancelled_its_units_back_and_its_money_voided() -> None:
    drop = make_drop(quantity=2, per_buyer_limit=2)
    order = confirmed_order(drop, captured=False)

    refunds.cancel_order(order_id=order.pk, buyer_id=order.buyer_id)

    assert Payment.objects.get(order=order).state == "void_pending"
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.sold, numbers.drift) == (2, 0, 0)
    with pytest.raises(refunds.NotRefundable):
        refunds.request_refund(order_id=order.pk, by=None)


def test_a_captured_order_cannot_be_cancelled_by_the_buyer() -> None:
    order = confirmed_order(make_drop(quantity=2, per_buyer_limit=2))

    with pytest.raises(refunds.NotCancellable, match="refund"):
        refunds.cancel_order(order_id=order.pk, buyer_id=order.buyer_id)
    assert Order.objects.get(pk=order.pk).state == OrderState.CONFIRMED


def test_a_cancel_racing_the_capture_waits_for_it_and_one_of_them_wins() -> None:
    # given a confirmed order whose capture is under way: settle_payment holds the payment row
    order = confirmed_order(make_drop(quantity=2, per_buyer_limit=2), captured=False)
    payment = Payment.objects.get(order=order)
    capturing, answer = threading.Event(), threading.Event()
    outcome: dict[str, object] = {}

    def capture() -> None:
        with transaction.atomic():
            Payment.objects.select_for_update().get(pk=payment.pk)
            capturing.set()
            answer.wait(10)  # the provider answering
            Payment.objects.filter(pk=payment.pk).update(state=PaymentState.CAPTURED)
        connection.close()

    def cancel() -> None:
        try:
            outcome["cancel"] = refunds.cancel_order(order_id=order.pk, buyer_id=order.buyer_id).state
        except refunds.NotCancellable as error:
            outcome["cancel"] = error
        finally:
            connection.close()

    settle = threading.Thread(target=capture)
    settle.start()
    assert capturing.wait(10)
    buyer = threading.Thread(target=cancel)
    buyer.start()
    # then the cancel waits on the payment row while the capture is asked (it must not void a
    # capture in flight): seen in pg_stat_activity, not slept for
    deadline = time.monotonic() + 10
    while lock_waits() < 1 and time.monotonic() < deadline and buyer.is_alive():
        time.sleep(0.01)
    assert lock_waits() == 1 and "cancel" not in outcome
    answer.set()
    settle.join(10)
    buyer.join(10)

    assert isinstance(outcome["cancel"], refunds.NotCancellable)
    assert Payment.objects.get(pk=payment.pk).state == "captured"
    assert invariant(drop_id=order.drop_id).sold == 2


def test_the_order_page_offers_the_cancel_until_the_money_is_taken_and_lists_refunds() -> None:
    drop = make_drop(quantity=2, per_buyer_limit=1)
    waiting = confirmed_order(drop, quantity=1, captured=False)
    paid = confirmed_order(drop, quantity=1)
    accepted(refunds.request_refund(order_id=paid.pk, by=None, reason="late delivery").refund)
    buyer, other = Client(), Client()
    buyer.force_login(waiting.buyer)
    other.force_login(paid.buyer)

    page = buyer.get(f"/orders/{waiting.pk}/").content.decode()
    assert 'id="cancel-order"' in page
    assert buyer.get(f"/api/orders/{waiting.pk}").json()["cancellable"] is True  # the page's poll ends
    assert other.get(f"/api/orders/{paid.pk}").json()["cancellable"] is False  # on this: no cancel
    assert other.post(f"/orders/{waiting.pk}/cancel").status_code == 302  # told, and nothing changes
    assert Order.objects.get(pk=waiting.pk).state == "confirmed"
    assert buyer.post(f"/orders/{waiting.pk}/cancel").status_code == 302
    assert Order.objects.get(pk=waiting.pk).state == "cancelled"
    cancelled = buyer.get(f"/orders/{waiting.pk}/").content.decode()
    assert "Cancelled" in cancelled and "nothing was taken from your card" in cancelled
    assert "updates by itself" not in cancelled

    # a refunded order's page is final, with the refund's amount and the reason the shop gave
    refunded = other.get(f"/orders/{paid.pk}/").content.decode()
    assert 'id="cancel-order"' not in refunded and "refunded" in refunded and "€10.00" in refunded
    assert "This order was refunded: €10.00 goes back to the card it was paid with." in refunded
    assert "The shop's reason: late delivery" in refunded
    assert "updates by itself" not in refunded
    assert buyer.get("/orders/notanumber/cancel").status_code == 404


def test_a_refunded_unit_no_longer_counts_against_the_buyers_limit() -> None:
    # given a buyer who bought the most they may (2) and had one of them refunded
    drop = make_drop(quantity=6, per_buyer_limit=2)
    order = confirmed_order(drop, quantity=2)
    accepted(refunds.request_refund(order_id=order.pk, quantity=1, restock=True, by=None).refund)

    # when they reserve two more, then one
    with pytest.raises(LimitReached, match="counting what you bought"):
        holds.reserve(drop=drop, buyer_id=order.buyer_id, quantity=2, idempotency_key="again-2")
    again = holds.reserve(drop=drop, buyer_id=order.buyer_id, quantity=1, idempotency_key="again-1")

    # then the one refunded is theirs to buy again, and no more
    assert again.created and again.hold.quantity == 1
    assert invariant(drop_id=drop.pk).drift == 0


@pytest.mark.parametrize("outcome", ["refund.succeeded", "refund.failed"])
def test_a_pending_refund_moves_no_unit_until_the_provider_says_it_went_through(outcome: str) -> None:
    # given a pending refund of one unit, to go back on sale
    drop = make_drop(quantity=3, per_buyer_limit=2)
    order = confirmed_order(drop, quantity=2)
    refund = refunds.request_refund(order_id=order.pk, quantity=1, restock=True, by=None).refund
    refunds._record(refund, "pending", "re_wait", "")
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.sold, numbers.refunded) == (1, 2, 0)  # nothing moved yet
    payment = Payment.objects.get(order=order)

    # when the provider's word comes
    facts = ProviderEvent(
        event_id=f"evt_{outcome}",
        type=outcome,
        session_id=str(payment.session_id),
        reference=refund.key,
        amount_minor=refund.amount_minor,
        currency="EUR",
        refund_id="re_wait",
    )
    event_pk = services.record_webhook(provider_name="simulated", event=facts, payload={"id": facts.event_id})
    assert event_pk is not None
    said = services.process_event(event_pk=event_pk)

    # then a refund that went through puts its unit back on sale; one that failed moved none and
    # leaves the order refundable again
    numbers = invariant(drop_id=drop.pk)
    order.refresh_from_db()
    if outcome == "refund.succeeded":
        assert said == "refund_succeeded"
        assert (numbers.available, numbers.sold, order.refunded_quantity) == (2, 1, 1)
    else:
        assert said == "refund_failed"
        assert (numbers.available, numbers.sold, order.refunded_quantity, order.refunded_minor) == (
            1,
            2,
            0,
            0,
        )
        assert refunds.request_refund(order_id=order.pk, by=None).refund.quantity == 2
    assert numbers.drift == 0
