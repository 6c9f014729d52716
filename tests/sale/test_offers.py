"""Returned units go to the next ticket in line, under a crowd that clicks as fast as it can.

A waiting-room drop's units come back (released, or an offer that lapsed) while admitted buyers
hammer the claim paths on their own connections; beat's offer step runs beside them. The buyers
who got the returned units must be exactly the next tickets, in ticket order. The control runs
the same crowd against a drop whose returns are open to any claim (the first to click wins), and
the same order check must fail there.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable

import pytest
from django.db import connection, connections, transaction

from admission import services as line
from admission.models import Queue, Ticket
from catalogue.services import NewVariant
from core import locks
from core.errors import FloodgateError, HoldNotActive, SoldOut, UnitTaken
from holds import services as holds
from holds.counts import invariant, invariant_by_variant
from holds.models import Hold
from inventory import services as stock
from inventory.models import Unit
from sale import offers
from shop.models import Drop
from tests.factories import expire_in, make_drop, size_of
from tests.sale.helpers import current, in_line, offer_of, offered_hold

pytestmark = pytest.mark.django_db(transaction=True)

UNITS = 40
RETURNS = 1_000
CONTROL_RETURNS = 200
LAPSE_EVERY = 7  # one return in seven is an offer (or hold) left to run out rather than released


def received_in_order(drop_id: int, *, after_hold: int) -> list[int]:
    """The ticket numbers of the buyers who got a unit after `after_hold`, in the order they got it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.number FROM holds_hold h"
            "  JOIN admission_ticket t ON t.drop_id = h.drop_id AND t.buyer_id = h.buyer_id"
            " WHERE h.drop_id = %s AND h.id > %s ORDER BY h.id",
            [drop_id, after_hold],
        )
        return [row[0] for row in cursor.fetchall()]


def in_ticket_order(numbers: list[int], *, first: int) -> bool:
    """The next tickets from `first`, each once, in order."""
    return numbers == list(range(first, first + len(numbers)))


def offer_state(drop: Drop, buyer: int) -> object:
    """The state of the buyer's offer as their place in line tells it."""
    offer = line.place(drop=drop, buyer_id=buyer).as_json()["offer"]
    assert isinstance(offer, dict), offer
    return offer["state"]


def crowd_of_returns(drop_id: int, *, buyers: list[int], returns: int) -> dict[str, float]:
    """Release (or let lapse) `returns` live holds of the drop while two threads of admitted buyers
    claim as fast as they can (one through `reserve`, one in batches as the lane does) and an
    offerer runs beat's step back to back. Returns what the crowd won and how long it took."""
    stop = threading.Event()
    won = {"single": 0, "batch": 0}
    errors: list[BaseException] = []

    def guarded(body: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                body()
            except BaseException as error:  # reported by the test
                errors.append(error)
                stop.set()
            finally:
                connections.close_all()

        return run

    def crowd_single() -> None:
        while not stop.is_set():
            drop = current(drop_id)
            try:
                holds.reserve(
                    drop=drop, buyer_id=random.choice(buyers), quantity=1, idempotency_key=uuid.uuid4().hex
                )
                won["single"] += 1
            except FloodgateError:
                pass

    def crowd_batch() -> None:
        while not stop.is_set():
            drop = current(drop_id)
            asks = [holds.Ask(buyer_id=b, quantity=1, key=uuid.uuid4().hex) for b in random.sample(buyers, 8)]
            answers = holds.reserve_batch(drop=drop, asks=asks)
            won["batch"] += sum(isinstance(a, holds.Reservation) for a in answers)

    def offerer() -> None:
        while not stop.is_set():
            offers.offer_returns(current(drop_id))
            time.sleep(0.005)

    threads = [threading.Thread(target=guarded(job)) for job in (crowd_single, crowd_batch, offerer)]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    done = 0
    try:
        while done < returns and not stop.is_set():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT id, buyer_id FROM holds_hold WHERE drop_id = %s AND state = 'held'"
                    " AND expires_at > now() ORDER BY random() LIMIT 1",
                    [drop_id],
                )
                row = cursor.fetchone()
            if row is None:
                time.sleep(0.002)  # every unit is on its way to the next ticket
                continue
            if done % LAPSE_EVERY == 0:
                expire_in([row[0]], -1)  # nobody pays: it runs out, and the offerer's reclaim returns it
                done += 1
            elif holds.release(hold_id=row[0], buyer_id=row[1]):
                done += 1
        # Let every returned unit reach the line (or the crowd), then stop.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not stop.is_set():
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM holds_hold"
                    " WHERE drop_id = %s AND state = 'held' AND expires_at <= now()",
                    [drop_id],
                )
                overdue = cursor.fetchone()[0]
                returned = stock.returned_units(cursor, drop_id=drop_id)
            if not overdue and not returned:
                break
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return {**won, "seconds": round(time.monotonic() - started, 2)}


@pytest.mark.slow
def test_a_thousand_returned_units_reach_the_next_tickets_in_ticket_order_under_a_crowd(make_buyers) -> None:
    drop = make_drop(slug="returns", quantity=UNITS, buckets=4, waiting_room=True, per_buyer_limit=1)
    by_number = in_line(drop.pk, make_buyers(UNITS + RETURNS + 100, prefix="line"))
    for number in range(1, UNITS + 1):  # the first tickets hold every unit
        holds.reserve(drop=drop, buyer_id=by_number[number], quantity=1, idempotency_key="rush")
    last_rush_hold = Hold.objects.filter(drop=drop).latest("id").pk

    crowd = crowd_of_returns(drop.pk, buyers=list(by_number.values()), returns=RETURNS)

    got = received_in_order(drop.pk, after_hold=last_rush_hold)
    assert crowd["single"] == crowd["batch"] == 0  # no click ever took a returned unit
    assert len(got) == RETURNS  # each return reached the line once
    assert in_ticket_order(got, first=UNITS + 1), got[:20]
    assert Queue.objects.get(pk=drop.pk).offered_through == UNITS + RETURNS
    assert invariant(drop_id=drop.pk).drift == 0


def test_control_returns_open_to_any_claim_go_to_whoever_clicks_first(make_buyers) -> None:
    drop = make_drop(slug="returns-open", quantity=UNITS, buckets=4, per_buyer_limit=1)  # no waiting room
    buyers = make_buyers(UNITS + CONTROL_RETURNS + 100, prefix="open")
    Ticket.objects.bulk_create(Ticket(drop=drop, buyer_id=b, number=i + 1) for i, b in enumerate(buyers))
    for buyer in buyers[:UNITS]:
        holds.reserve(drop=drop, buyer_id=buyer, quantity=1, idempotency_key="rush")
    last_rush_hold = Hold.objects.filter(drop=drop).latest("id").pk

    crowd = crowd_of_returns(drop.pk, buyers=buyers, returns=CONTROL_RETURNS)

    got = received_in_order(drop.pk, after_hold=last_rush_hold)
    assert crowd["single"] + crowd["batch"] == len(got) > 0  # the clicks took them
    assert not in_ticket_order(got, first=UNITS + 1), got[:20]  # so the order check catches it
    assert invariant(drop_id=drop.pk).drift == 0


def test_an_offer_lapses_to_the_next_ticket_and_paying_keeps_it_for_the_hold_time(make_buyers) -> None:
    drop = make_drop(slug="lapse", quantity=1, waiting_room=True, offer_seconds=60, hold_seconds=480)
    by_number = in_line(drop.pk, make_buyers(4, prefix="lapse"))
    first = holds.reserve(drop=drop, buyer_id=by_number[1], quantity=1, idempotency_key="k").hold
    assert offers.offer_returns(drop) == 0  # nothing returned yet

    holds.release(hold_id=first.pk, buyer_id=by_number[1])
    assert offers.offer_returns(drop) == 1
    two = offer_of(drop.pk, 2)
    assert two is not None and two.open and not two.paying
    made = Hold.objects.get(pk=two.hold)
    assert (made.expires_at - made.created_at).total_seconds() == 60  # the offer's own deadline
    assert offer_state(drop, by_number[2]) == "held"
    with pytest.raises(SoldOut):  # ticket 3 clicks: the unit is not theirs
        holds.reserve(drop=drop, buyer_id=by_number[3], quantity=1, idempotency_key="k")

    expire_in([two.hold], -1)  # ticket 2 did nothing
    assert offers.offer_returns(drop) == 1
    assert offer_state(drop, by_number[2]) == "lapsed"
    three = offer_of(drop.pk, 3)
    assert three is not None and three.open

    with connection.cursor() as cursor, transaction.atomic():
        holds.hold_for_payment(cursor, hold_id=three.hold, buyer_id=by_number[3])  # ticket 3 pays
    paying = offer_of(drop.pk, 3)
    assert paying is not None and paying.paying
    # the hold's full time from the start of paying: 480 s, against the offer's 60
    assert (paying.expires_at - three.expires_at).total_seconds() >= 420
    # ticket 2's lapsed offer cannot be paid for
    with pytest.raises(HoldNotActive), connection.cursor() as cursor, transaction.atomic():
        holds.hold_for_payment(cursor, hold_id=two.hold, buyer_id=by_number[2])
    assert invariant(drop_id=drop.pk).drift == 0


def test_with_nobody_left_waiting_returned_units_open_to_any_admitted_buyer(make_buyers) -> None:
    drop = make_drop(slug="nobody", quantity=2, waiting_room=True)
    by_number = in_line(drop.pk, make_buyers(2, prefix="nobody"))
    held = [
        holds.reserve(drop=drop, buyer_id=by_number[n], quantity=1, idempotency_key="k").hold for n in (1, 2)
    ]
    holds.release(hold_id=held[0].pk, buyer_id=by_number[1])

    assert offers.offer_returns(drop) == 0  # both tickets have had a unit
    latecomer = make_buyers(1, prefix="late")[0]
    assert holds.reserve(drop=drop, buyer_id=latecomer, quantity=1, idempotency_key="k").created
    assert invariant(drop_id=drop.pk).drift == 0


def test_a_paused_drop_offers_nothing_and_passes_nobody(make_buyers) -> None:
    drop = make_drop(slug="paused-offers", quantity=1, waiting_room=True)
    by_number = in_line(drop.pk, make_buyers(3, prefix="pause"))
    hold = holds.reserve(drop=drop, buyer_id=by_number[1], quantity=1, idempotency_key="k").hold
    holds.release(hold_id=hold.pk, buyer_id=by_number[1])
    drop.paused = True
    drop.save(update_fields=["paused"])

    assert offers.offer_returns(drop) == 0
    assert Queue.objects.get(pk=drop.pk).offered_through == 0
    drop.paused = False
    drop.save(update_fields=["paused"])
    assert offers.offer_returns(drop) == 1 and offer_of(drop.pk, 2) is not None


def test_a_returned_seat_goes_to_the_next_ticket_not_to_a_buyer_who_picks_it(make_buyers) -> None:
    drop = make_drop(slug="seats-back", quantity=2, mode="units", unit_labels=["A1", "A2"], waiting_room=True)
    by_number = in_line(drop.pk, make_buyers(4, prefix="seat"))
    first = holds.reserve(drop=drop, buyer_id=by_number[1], quantity=1, idempotency_key="k", unit="A1").hold
    holds.reserve(drop=drop, buyer_id=by_number[2], quantity=1, idempotency_key="k", unit="A2")
    holds.release(hold_id=first.pk, buyer_id=by_number[1])

    assert Unit.objects.get(drop=drop, label="A1").state == "returned"
    with pytest.raises(UnitTaken):  # ticket 4 picks the seat on the page
        holds.reserve(drop=drop, buyer_id=by_number[4], quantity=1, idempotency_key="k", unit="A1")
    assert offers.offer_returns(drop) == 1
    offer = offer_of(drop.pk, 3)
    assert offer is not None and Unit.objects.get(drop=drop, label="A1").hold_id == offer.hold
    assert invariant(drop_id=drop.pk).drift == 0


def test_waiting_room_turned_off_opens_its_returned_units(make_buyers) -> None:
    drop = make_drop(slug="room-off", quantity=1, waiting_room=True)
    by_number = in_line(drop.pk, make_buyers(2, prefix="off"))
    hold = holds.reserve(drop=drop, buyer_id=by_number[1], quantity=1, idempotency_key="k").hold
    holds.release(hold_id=hold.pk, buyer_id=by_number[1])
    drop.waiting_room = False
    drop.save(update_fields=["waiting_room"])

    assert offers.offer_returns(drop) == 0
    buyer = make_buyers(1, prefix="walk-in")[0]
    assert holds.reserve(drop=drop, buyer_id=buyer, quantity=1, idempotency_key="k").created


def test_offer_step_yields_to_a_claim_holding_the_buyer_row(make_buyers) -> None:
    """A buyer's claim in flight holds their hold row: the offerer gives up (lock_timeout) instead
    of waiting, and offers on the next run."""
    drop = make_drop(slug="yield", quantity=1, waiting_room=True)
    by_number = in_line(drop.pk, make_buyers(3, prefix="yield"))
    hold = holds.reserve(drop=drop, buyer_id=by_number[1], quantity=1, idempotency_key="k").hold
    holds.release(hold_id=hold.pk, buyer_id=by_number[1])
    other = connections.create_connection("default")
    try:
        other.set_autocommit(False)
        with other.cursor() as cursor:  # ticket 2's own claim, mid-transaction
            cursor.execute(
                "INSERT INTO holds_hold (drop_id, buyer_id, quantity, state, idempotency_key, request_digest,"
                " created_at, expires_at, extended) VALUES (%s, %s, 1, 'held', 'mine', '', now(),"
                " now() + interval '1 minute', false)",
                [drop.pk, by_number[2]],
            )
        # Returns while the claim still holds the row: it gave way (lock_timeout) instead of waiting.
        assert offers.offer_returns(drop) == 0
        other.rollback()  # the claim found no stock and took nothing back
    finally:
        other.close()
    assert offers.offer_returns(drop) == 1 and offer_of(drop.pk, 2) is not None
    assert Queue.objects.get(pk=drop.pk).offered_through == 2


def test_the_offer_step_waits_out_a_wave_that_has_the_line_instead_of_skipping_its_turn(make_buyers) -> None:
    """The tick takes the line's lock every second; an offerer on the same period that only tried
    it, started in the same instant (two duties one web process took over), lost every time."""
    drop = make_drop(slug="wave-held", quantity=1, waiting_room=True)
    by_number = in_line(drop.pk, make_buyers(3, prefix="waveheld"))
    first = holds.reserve(drop=drop, buyer_id=by_number[1], quantity=1, idempotency_key="k").hold
    holds.release(hold_id=first.pk, buyer_id=by_number[1])
    taken, waited = threading.Event(), threading.Event()
    key = [int(locks.Namespace.WAVE), drop.pk % 2147483647]  # as core.locks folds it

    def wave() -> None:  # a wave's transaction on its own connection, until the offerer waits on it
        tick, watch = connections.create_connection("default"), connections.create_connection("default")
        try:
            tick.set_autocommit(False)
            with tick.cursor() as cursor, watch.cursor() as look:
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", key)
                taken.set()
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline and not waited.is_set():
                    look.execute(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                        " AND classid::bigint = %s AND objid::bigint = %s",
                        key,
                    )
                    if look.fetchone()[0]:
                        waited.set()
                    else:
                        time.sleep(0.005)
            tick.commit()
        finally:
            tick.close()
            watch.close()

    ticking = threading.Thread(target=wave)
    ticking.start()
    assert taken.wait(10)
    assert offers.offer_returns(drop) == 1  # it waited the wave out
    ticking.join()
    assert waited.is_set()  # seen waiting in pg_locks, not merely late to a lock already free
    assert offer_of(drop.pk, 2) is not None


def test_a_number_whose_join_commits_after_a_later_one_is_offered_not_passed(make_buyers) -> None:
    """Numbers come from a counter before the ticket row commits: 2 may land after 3 was offered."""
    drop = make_drop(slug="late-commit", quantity=1, waiting_room=True)
    by_number = in_line(drop.pk, make_buyers(2, prefix="late-commit"))
    Ticket.objects.filter(drop=drop, number=2).update(number=3)  # 3 committed; 2 still in flight
    hold = holds.reserve(drop=drop, buyer_id=by_number[1], quantity=1, idempotency_key="k").hold
    holds.release(hold_id=hold.pk, buyer_id=by_number[1])
    assert offers.offer_returns(drop) == 1
    three = offer_of(drop.pk, 3)
    assert three is not None and Queue.objects.get(pk=drop.pk).offered_through == 3

    late = make_buyers(1, prefix="late-two")[0]
    Ticket.objects.create(drop=drop, buyer_id=late, number=2)  # ticket 2's join commits now
    holds.release(hold_id=three.hold, buyer_id=by_number[2])  # 3 lets the unit go

    assert offers.offer_returns(drop) == 1
    two = offer_of(drop.pk, 2)
    assert two is not None and two.open  # offered, not passed (nor opened to the crowd)
    assert Hold.objects.get(pk=two.hold).buyer_id == late


def test_a_buyers_own_key_shaped_like_an_offer_is_not_an_offer(make_buyers) -> None:
    drop = make_drop(slug="key-shape", quantity=2, waiting_room=True)
    by_number = in_line(drop.pk, make_buyers(1, prefix="key-shape"))
    ticket = Ticket.objects.get(drop=drop, number=1)
    holds.reserve(drop=drop, buyer_id=by_number[1], quantity=1, idempotency_key=line.offer_key(ticket.pk))
    assert line.offer_of(ticket) is None


@pytest.mark.parametrize("mode", ["buckets", "units"])
def test_a_returned_size_is_offered_as_that_size_and_counted_in_it(make_buyers, mode: str) -> None:
    sizes = [NewVariant("M", 1), NewVariant("L", 1)]
    drop = make_drop(slug=f"sizes-back-{mode}", quantity=2, mode=mode, waiting_room=True, variants=sizes)
    m, l_size = drop.variants.all()
    by_number = in_line(drop.pk, make_buyers(3, prefix=f"size-{mode}"))
    first = holds.reserve(drop=drop, variant=l_size, buyer_id=by_number[1], quantity=1, idempotency_key="k")
    holds.reserve(drop=drop, variant=m, buyer_id=by_number[2], quantity=1, idempotency_key="k")
    holds.release(hold_id=first.hold.pk, buyer_id=by_number[1])

    assert offers.offer_returns(drop) == 1
    offer = offer_of(drop.pk, 3)
    assert offer is not None and Hold.objects.get(pk=offer.hold).variant == l_size
    assert [(v.name, v.available, v.held, v.drift) for v in invariant_by_variant(drop_id=drop.pk)] == [
        ("M", 0, 1, 0),
        ("L", 0, 1, 0),
    ]


@pytest.mark.parametrize("mode", ["buckets", "units"])
def test_an_offer_covers_up_to_the_buyers_limit_from_one_pool_of_returned_units(
    make_buyers, mode: str
) -> None:
    # given three units of one size and one of another come back, for buyers who may have two each
    sizes = [NewVariant("M", 3), NewVariant("L", 1)]
    drop = make_drop(
        slug=f"two-each-{mode}", quantity=4, mode=mode, waiting_room=True, per_buyer_limit=3, variants=sizes
    )
    m, l_size = drop.variants.all()
    by_number = in_line(drop.pk, make_buyers(5, prefix=f"two-{mode}"))
    first = holds.reserve(drop=drop, variant=m, buyer_id=by_number[1], quantity=3, idempotency_key="k")
    other = holds.reserve(drop=drop, variant=l_size, buyer_id=by_number[2], quantity=1, idempotency_key="k")
    Drop.objects.filter(pk=drop.pk).update(per_buyer_limit=2)  # the merchant lowered it since
    drop.refresh_from_db()
    holds.release(hold_id=first.hold.pk, buyer_id=by_number[1])
    holds.release(hold_id=other.hold.pk, buyer_id=by_number[2])

    # when the offer step runs
    offered = offers.offer_returns(drop)

    # then the next tickets get two M, then the last M, then the L: each hold one size, in order
    got = []
    for number in (3, 4, 5):
        offer = offer_of(drop.pk, number)
        assert offer is not None
        hold = Hold.objects.get(pk=offer.hold)
        got.append((number, hold.quantity, size_of(hold)))
    assert offered == 3 and got == [(3, 2, "M"), (4, 1, "M"), (5, 1, "L")]
    if mode == "units":
        assert Unit.objects.filter(drop=drop, hold_id=offered_hold(drop.pk, 3), variant=m).count() == 2
    assert all(v.drift == 0 and v.held == v.quantity for v in invariant_by_variant(drop_id=drop.pk))
