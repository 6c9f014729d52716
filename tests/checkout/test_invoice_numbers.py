"""Invoice numbers: one gapless sequence, taken in the confirming transaction. Concurrent
confirmations on their own connections get consecutive numbers; the controls show the race a
read-then-write numbering loses and the gap a PostgreSQL SEQUENCE leaves on rollback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial

import pytest
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper

from checkout import invoices
from checkout import services as checkout
from checkout.models import Invoice, Order, OrderState
from config.celery import app as celery_app
from tests.checkout.helpers import pending_sales
from tests.concurrency import run_concurrently
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)

N = 16


@pytest.fixture(autouse=True)
def empty_queue_afterwards() -> Iterator[None]:
    """process_event enqueues settle and relay tasks; nobody consumes them here."""
    yield
    celery_app.control.purge()


def confirm_all_at_once(slug: str) -> tuple[list[str | BaseException], list[int]]:
    drop = make_drop(slug=slug, quantity=N, per_buyer_limit=1)
    sales = pending_sales(drop, [make_buyer().pk for _ in range(N)])
    results = run_concurrently([partial(checkout.process_event, event_pk=s.event) for s in sales], threads=N)
    numbers = sorted(Invoice.objects.filter(kind="invoice").values_list("number", flat=True))
    return results, numbers


def read_then_write(cursor: CursorWrapper, *, sequence: str) -> int:
    """Numbering as it is often first written: the highest number so far, plus one."""
    cursor.execute("SELECT coalesce(max(number), 0) + 1 FROM checkout_invoice WHERE kind = %s", [sequence])
    row = cursor.fetchone()
    assert row is not None
    time.sleep(0.05)  # the rest of a confirmation's statements between the read and the insert
    return int(row[0])


def test_control_read_then_write_numbering_gives_duplicates_under_concurrent_confirmations(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given numbering that reads the last number instead of locking a counter
    monkeypatch.setattr(invoices, "next_number_in", read_then_write)

    # when N orders are confirmed at once
    results, numbers = confirm_all_at_once("inv-control")

    # then confirmations collide on one number (the unique constraint refuses the second, and its
    # whole confirmation rolls back): the race the counter row exists for
    failed = [r for r in results if isinstance(r, BaseException)]
    assert failed, numbers
    assert len(numbers) < N


def test_n_concurrent_confirmations_get_n_consecutive_invoice_numbers() -> None:
    results, numbers = confirm_all_at_once("inv-race")

    assert results == ["confirmed"] * N, results
    assert numbers == list(range(1, N + 1))  # no gap, no duplicate
    assert Order.objects.filter(state=OrderState.CONFIRMED, invoices__kind="invoice").count() == N


def test_a_rolled_back_confirmation_gives_its_number_back(monkeypatch: pytest.MonkeyPatch) -> None:
    drop = make_drop(slug="inv-rollback", quantity=3, per_buyer_limit=1)
    first, second = pending_sales(drop, [make_buyer().pk, make_buyer().pk])
    issue = invoices.issue_invoice_in

    def issue_then_crash(cursor: CursorWrapper, **kwargs: object) -> Invoice:
        issue(cursor, **kwargs)  # type: ignore[arg-type]
        raise RuntimeError("the worker died after the number was taken")

    # given a confirmation that takes number 1 and then fails
    monkeypatch.setattr(invoices, "issue_invoice_in", issue_then_crash)
    with pytest.raises(RuntimeError):
        checkout.process_event(event_pk=first.event)
    monkeypatch.undo()
    assert Order.objects.get(pk=first.order).state == OrderState.PENDING
    assert not Invoice.objects.exists()

    # when the next confirmations commit
    assert checkout.process_event(event_pk=second.event) == "confirmed"
    assert checkout.process_event(event_pk=first.event) == "confirmed"

    # then number 1 was given back: no gap
    assert list(Invoice.objects.order_by("number").values_list("order_id", "number")) == [
        (second.order, 1),
        (first.order, 2),
    ]


def test_control_a_postgresql_sequence_leaves_a_gap_on_rollback() -> None:
    """Why the counter is a row: a SEQUENCE never hands a rolled-back number out again."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMPORARY SEQUENCE invoice_control_seq")
        try:
            with transaction.atomic():
                cursor.execute("SELECT nextval('invoice_control_seq')")
                assert cursor.fetchone() == (1,)
                transaction.set_rollback(True)
            cursor.execute("SELECT nextval('invoice_control_seq')")
            assert cursor.fetchone() == (2,)  # 1 is gone for good
        finally:
            cursor.execute("DROP SEQUENCE invoice_control_seq")


def test_the_counter_refuses_to_run_outside_a_transaction() -> None:
    with connection.cursor() as cursor, pytest.raises(RuntimeError):
        invoices.next_number_in(cursor, sequence="invoice")
