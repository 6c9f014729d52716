"""The waiting room: join, the draw at the start, admission waves, a buyer's place.

PostgreSQL keeps the line (tickets, the mark, the seed); Redis hands out the next number
after the draw (an INCR rather than a hot counter row) and carries the snapshots.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone
from django.utils.translation import gettext_lazy
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from admission import beacon, sql, state, tokens, work
from admission import draw as draw_rule
from admission.answers import Draw, OfferState
from admission.answers import Offer as OfferAnswer
from admission.draw import RULE
from admission.drawing import (
    DRAW_FIELDS,
    DRAWS_IN,
    ROUND_WAIT,
    close_entries,
    closes_at,
    draw,
    open_queues,
    queue_for,
    round_due_at,
    round_if_due,
)
from admission.models import Queue, Ticket, Wave
from catalogue import selectors as catalogue
from core import locks
from core.errors import Busy, Ended, FloodgateError, SoldOut, fill
from holds import gate
from holds import services as holds
from holds.models import HoldState
from inventory import services as stock
from shop.models import Drop, DropState

log = logging.getLogger(__name__)

COUNTER = "fg:queue:{drop}:next"
# INCR that never hands out a number at or below the floor the database reports (so a
# flushed or lost counter rebuilds itself from the tickets instead of repeating numbers).
NEXT_NUMBER = """
local n = redis.call('INCR', KEYS[1])
local floor = tonumber(ARGV[1])
if n <= floor then
  n = floor + 1
  redis.call('SET', KEYS[1], n)
end
return n
"""


class NoWaitingRoom(FloodgateError):
    code, status = "no_waiting_room", 409


class EntriesClosed(FloodgateError):
    """A raffle's entries closed at its start (the draw ranks those it had): no new entry."""

    code, status = "entries_closed", 409


class NotInQueue(FloodgateError):
    code, status = "not_in_queue", 404


@dataclass(frozen=True)
class Offer:
    """The returned unit held for a ticket (sale/offers.py): yours until `expires_at`, unless
    paying has started (then the hold's full time); lapsed, it went to the next ticket."""

    hold: int
    state: str  # the hold's: held, sold, released, expired
    expires_at: datetime
    paying: bool
    variant: str = ""  # the size that came back ('' for a drop of one variant)

    @property
    def open(self) -> bool:
        return self.state == "held" and self.expires_at > timezone.now()

    def answer(self) -> OfferAnswer:
        return OfferAnswer(
            hold=self.hold,
            state=OfferState.HELD
            if self.open
            else (OfferState.SOLD if self.state == HoldState.SOLD else OfferState.LAPSED),
            expires_at=self.expires_at,
            paying=self.paying,
            variant=self.variant or None,
        )


def offer_key(ticket_id: int) -> str:
    return sql.OFFER_KEY.format(ticket=ticket_id)


def offer_of(ticket: Ticket) -> Offer | None:
    with connection.cursor() as cursor:
        cursor.execute(
            sql.OFFER_OF, {"drop": ticket.drop_id, "buyer": ticket.buyer_id, "key": offer_key(ticket.pk)}
        )
        row = cursor.fetchone()
    return Offer(*row) if row else None


@dataclass(frozen=True)
class Standing:
    """A buyer's place in a drop's line, as the API and the page show it."""

    ticket: Ticket
    queue: Queue
    snapshot: state.Snapshot
    token: str | None
    offer: Offer | None = None

    @property
    def number(self) -> int | None:
        return self.ticket.number

    def as_json(self, *, queue_ticket: str | None = None) -> dict[str, object]:
        return state.place_answer(
            self.snapshot.queue_json(),
            entry=self.ticket.pk,
            number=self.number,
            admitted_through=self.queue.admitted_through,
            drawn=self.queue.drawn_at is not None,
            token=self.token,
            offer=self.offer.answer() if self.offer else None,
            queue_ticket=queue_ticket,
        ).dump()


@dataclass(frozen=True)
class JoinAsk:
    """One buyer asking for a place (with the proof of work, where the drop asks for one)."""

    buyer_id: int
    proof: str | None = None
    challenge: str | None = None


def join(*, drop: Drop, buyer_id: int, proof: str | None = None, challenge: str | None = None) -> Standing:
    """The buyer's ticket, new or the one they already have (any tab, device or reconnect).

    A new place costs the drop's proof of work (admission.work), if it asks for one."""
    (answer,) = join_many(drop=drop, asks=[JoinAsk(buyer_id, proof, challenge)])
    if isinstance(answer, FloodgateError):
        raise answer
    return answer


def join_many(*, drop: Drop, asks: list[JoinAsk]) -> list[Standing | FloodgateError]:
    """`join` for buyers of one drop who asked together (the lane's joins, batched): who may take
    part, who has a place already and the queue row are one read each, and the new places before
    the list closes one insert; each answer is what `join` alone would give, in the same order of
    checks."""
    buyers = [ask.buyer_id for ask in asks]
    refusals = catalogue.audience(drop, buyers)  # first: a rehearsal's copy says nothing to others
    existing = {t.buyer_id: t for t in Ticket.objects.filter(drop=drop, buyer_id__in=buyers)}
    answers: list[Standing | FloodgateError | Ticket | None] = [None] * len(asks)
    closed: FloodgateError | None = None
    if drop.state == DropState.ENDED:
        closed = Ended(gettext_lazy("This drop has ended; its waiting room is closed."))
    elif drop.raffle and timezone.now() >= drop.starts_at:
        closed = _entries_closed(drop)
    elif drop.state == DropState.LIVE and _line_closed(drop):
        closed = SoldOut(gettext_lazy("Sold out: the line is closed. Every unit is sold and none is held."))
    new: list[int] = []
    for i, ask in enumerate(asks):
        try:
            if (refusal := refusals[ask.buyer_id]) is not None:
                raise refusal
            if not drop.waiting_room:
                raise NoWaitingRoom(
                    gettext_lazy("This drop has no waiting room; buy from the drop page directly.")
                )
            if (ticket := existing.get(ask.buyer_id)) is not None:
                answers[i] = ticket
                continue
            if closed is not None:
                raise closed
            work.check(drop=drop, buyer_id=ask.buyer_id, challenge=ask.challenge, proof=ask.proof)
            new.append(i)
        except FloodgateError as error:
            answers[i] = error
    if not any(isinstance(a, Ticket) for a in answers) and not new:
        return [a for a in answers if isinstance(a, FloodgateError)]
    # The queue row read before the insert: its mark can only be behind, never admit early.
    queue = queue_for(drop)
    made = _new_tickets(drop, sorted({asks[i].buyer_id for i in new}), queue)
    for i in new:
        answers[i] = made[asks[i].buyer_id]
    return [
        place_of(drop=drop, ticket=a, queue=queue) if isinstance(a, Ticket) else a
        for a in answers
        if a is not None
    ]


def _line_closed(drop: Drop) -> bool:
    """Sold out with none held, as the published snapshot says (one Redis read, no query): nothing can
    come back, so no new place is given. No snapshot, or Redis away: not known to be closed."""
    snap = state.cached(drop.slug)
    if snap is None or snap.get("drop_id") != drop.pk:
        return False
    queue = snap.get("queue")
    return isinstance(queue, dict) and queue.get("state") == "sold_out"


def _new_tickets(drop: Drop, buyers: list[int], queue: Queue) -> dict[int, Ticket | FloodgateError]:
    """Each buyer's new ticket: before the list closes one insert for all of them; a buyer it did
    not place (joined from another tab meanwhile, or the list closed first) goes on alone."""
    made: dict[int, Ticket | FloodgateError] = {}
    if queue.entries_closed_at is None:
        with connection.cursor() as cursor:
            cursor.execute(sql.JOIN_BEFORE_DRAW, {"drop": drop.pk, "buyers": buyers})
            for ticket_id, buyer_id, joined_at in cursor.fetchall():
                made[buyer_id] = Ticket(
                    id=ticket_id, drop=drop, buyer_id=buyer_id, number=None, joined_at=joined_at
                )
    for buyer_id in buyers:
        if buyer_id not in made:
            try:
                made[buyer_id] = _new_ticket(drop, buyer_id)
            except FloodgateError as error:  # this buyer's answer, not the whole batch's
                made[buyer_id] = error
    return made


def _new_ticket(drop: Drop, buyer_id: int) -> Ticket:
    """A ticket after the list closed: a number after it (a raffle has none: its entries are the
    closed list), or the one the buyer got from another tab meanwhile."""
    if drop.raffle:
        existing = Ticket.objects.filter(drop=drop, buyer_id=buyer_id).first()
        if existing is None:
            raise _entries_closed(drop)
        return existing
    for _ in range(5):
        existing = Ticket.objects.filter(drop=drop, buyer_id=buyer_id).first()
        if existing is not None:
            return existing
        number = _next_number(drop)
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql.JOIN_AFTER_DRAW, {"drop": drop.pk, "buyer": buyer_id, "number": number})
                inserted = cursor.fetchone()
        except IntegrityError:
            log.info("admission: number %s of drop %s was taken (counter rebuilt); next", number, drop.pk)
            continue
        if inserted is not None:
            return Ticket(id=inserted[0], drop=drop, buyer_id=buyer_id, number=number, joined_at=inserted[1])
    existing = Ticket.objects.filter(drop=drop, buyer_id=buyer_id).first()
    if existing is None:
        raise Busy(gettext_lazy("The waiting room is very busy; try again in a second."))
    return existing


def _entries_closed(drop: Drop) -> EntriesClosed:
    closed = timezone.localtime(drop.starts_at)
    return EntriesClosed(
        fill(
            gettext_lazy("Entries to this raffle closed at %(closed)s; the draw has ranked those it had."),
            closed=format(closed, "%Y-%m-%d %H:%M %Z"),
        ),
        closed_at=drop.starts_at.isoformat(),
    )


def _next_number(drop: Drop) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql.NUMBER_FLOOR, {"drop": drop.pk})
        floor = int(cursor.fetchone()[0])
    try:
        client = get_redis_connection("default")
        return int(client.eval(NEXT_NUMBER, 1, COUNTER.format(drop=drop.pk), floor))
    except (RedisError, OSError) as error:
        log.warning("admission: Redis unavailable for a join: %s", error)
        raise Busy(
            gettext_lazy("The waiting room is catching its breath; please wait a moment and try again.")
        ) from None


def own_ticket(*, drop: Drop, buyer_id: int) -> Ticket | None:
    return Ticket.objects.filter(drop=drop, buyer_id=buyer_id).first()


def place(*, drop: Drop, buyer_id: int) -> Standing:
    ticket = Ticket.objects.filter(drop=drop, buyer_id=buyer_id).first()
    if ticket is None:
        raise NotInQueue(gettext_lazy("You are not in this drop's waiting room yet; join it with POST."))
    return place_of(drop=drop, ticket=ticket)


def place_of(*, drop: Drop, ticket: Ticket, queue: Queue | None = None) -> Standing:
    if queue is None:
        queue = queue_for(drop)  # the mark that admits is the database's, never a cached one
    snapshot = state.current(drop)
    admitted = ticket.number is not None and ticket.number <= queue.admitted_through
    token = None
    if admitted and ticket.number is not None and snapshot.state in (DropState.LIVE, DropState.PAUSED):
        token = tokens.issue(drop_id=drop.pk, buyer_id=ticket.buyer_id, ticket=ticket.number)
    offered = ticket.number is not None and ticket.number <= queue.offered_through
    offer = offer_of(ticket) if offered else None
    return Standing(ticket=ticket, queue=queue, snapshot=snapshot, token=token, offer=offer)


def queue_ticket(place: Standing, *, bound_to: str | None) -> str | None:
    """The signed ticket the edge answers this buyer's next polls from, bound to how they signed in."""
    if bound_to is None:
        return None
    ticket = place.ticket
    return tokens.issue_ticket(
        drop_id=ticket.drop_id,
        buyer_id=ticket.buyer_id,
        entry=ticket.pk,
        number=ticket.number,
        bound_to=bound_to,
    )


def draw_entries(*, drop: Drop) -> dict[str, object]:
    """What anyone needs to check the draw (admission/draw.py): from the queue's creation the seed's
    hash and the beacon round named; from the close the entry list's hash; after the draw the seed,
    the list, the round's signature and randomness (or why it could not be read), the order."""
    if not drop.waiting_room:
        raise NoWaitingRoom(gettext_lazy("This drop has no waiting room."))
    queue = queue_for(drop)
    body: dict[str, object] = {
        "seed_sha256": queue.seed_sha256,
        "drawn": queue.drawn_at is not None,
        "beacon_status": queue.beacon_status,
    }
    chain = beacon.BY_HASH.get(queue.beacon_chain)
    if chain is not None and queue.beacon_round is not None:
        body |= {
            "beacon_chain": chain.hash,
            "beacon_chain_name": chain.name,
            "beacon_scheme": chain.scheme,
            "beacon_public_key": chain.public_key,
            "beacon_round": queue.beacon_round,
            "beacon_round_at": chain.time_of(queue.beacon_round).isoformat(),
        }
    if queue.entries_closed_at is not None:
        body |= {
            "entries_closed_at": queue.entries_closed_at.isoformat(),
            "entries_sha256": queue.entries_sha256,
        }
    if queue.drawn_at is not None:
        drawn = Ticket.objects.filter(drop=drop, number__isnull=False, number__lte=queue.drawn_entries)
        order = list(drawn.order_by("number").values_list("id", flat=True))
        body |= {
            "seed": queue.seed,
            "drawn_at": queue.drawn_at.isoformat(),
            "entries": sorted(order),
            "entries_sha256": queue.entries_sha256,
            "beacon": queue.beacon,
            "beacon_signature": queue.beacon_signature,
            "beacon_previous_signature": queue.beacon_previous_signature,
            "beacon_note": queue.beacon_note,
            "order": order,
            "rule": RULE,
        }
    body |= {"unsteerable": draw_rule.unsteerable(body), "trust": draw_rule.trust(body)}
    return Draw.model_validate(body).dump()


def _stock(drop: Drop) -> tuple[int, int]:
    snap = state.compute([drop])[0]
    return snap.available, snap.held


def run_wave(drop: Drop, *, now: datetime | None = None, force: bool = False) -> Wave | None:
    """Advance the drop's admitted-through mark, if a wave is due; the draw comes first.

    Before the start it only closes the entry list (at drawing.closes_at) and draws it once its
    round is due, so the first wave at the start finds the order made.

    Admits about admission_percent% of the units still available, less the buyers admitted
    within the grace period (ADMISSION_GRACE_SECONDS, at most a token's lifetime) who have
    not come to buy yet: no-shows hold the line back for that long only. No stock, no admission: the line
    waits for units that come back, and the next tickets get them.
    """
    now = now or timezone.now()
    fetched = round_if_due(drop, now)
    with transaction.atomic():
        with connection.cursor() as cursor:
            if not locks.try_lock(cursor, locks.Namespace.WAVE, drop.pk):
                return None  # another worker runs this wave
        queue_for(drop, now=now)
        queue = Queue.objects.select_for_update().get(pk=drop.pk)
        drop.refresh_from_db()
        live = drop.state_at(now) == DropState.LIVE
        if queue.drawn_at is None:
            if drop.state_at(now) not in DRAWS_IN or now < closes_at(drop):
                return None
            if queue.entries_closed_at is None:
                close_entries(queue, now)
            drawn = draw(queue, drop, now, fetched)
            if not (drawn and live):
                queue.save(update_fields=DRAW_FIELDS)
                transaction.on_commit(lambda: state.refresh([drop.pk]))
                return None  # closed (and drawn) before the start; or the line waits for its round
        if not live:
            return None
        if drop.raffle:
            _raffle_drawn(drop, queue, now)
            return None
        due = queue.last_wave_at is None or now - queue.last_wave_at >= timedelta(
            seconds=drop.admission_wave_seconds
        )
        if not (due or force):
            return None  # (a draw just made leaves last_wave_at empty: a wave is due with it)
        available, held = _stock(drop)
        last = Ticket.objects.filter(drop=drop).aggregate(n=Max("number"))["n"] or 0
        grace = min(settings.ADMISSION_GRACE_SECONDS, settings.ADMISSION_TOKEN_SECONDS)
        since = (
            Wave.objects.filter(drop=drop, at__lte=now - timedelta(seconds=grace))
            .order_by("-at")
            .values_list("admitted_through", flat=True)
            .first()
        ) or 0
        with connection.cursor() as cursor:
            cursor.execute(
                sql.ADMITTED_NOT_COME, {"drop": drop.pk, "since": since, "through": queue.admitted_through}
            )
            pending = int(cursor.fetchone()[0])
        room = math.ceil(available * drop.admission_percent / 100) - pending if available > 0 else 0
        size = max(0, min(room, last - queue.admitted_through))
        queue.admitted_through += size
        queue.last_wave_at = now
        queue.save(update_fields=["admitted_through", "last_wave_at", *DRAW_FIELDS])
        wave = Wave(
            drop=drop, admitted_through=queue.admitted_through, admitted=size, available=available, held=held
        )
        if size:
            wave.save()
            log.info("admission: drop %s let %s in, through ticket %s", drop.pk, size, queue.admitted_through)
        transaction.on_commit(lambda: state.refresh([drop.pk]))
    return wave


def _raffle_drawn(drop: Drop, queue: Queue, now: datetime) -> None:
    """A raffle admits nobody in waves: at its draw every open unit goes to the line, and the offers
    (sale/offers.py, sent at once) hold one for each ranked entry in order, for the offer time: an
    unpaid or released win comes back to the line and goes to the next entry the same way."""
    if queue.last_wave_at is not None:
        return  # drawn and handed to the offers already
    with connection.cursor() as cursor:
        moved = stock.return_open(cursor, drop_id=drop.pk)
    queue.last_wave_at = now
    queue.save(update_fields=["last_wave_at", *DRAW_FIELDS])
    log.info("admission: raffle %s drawn, %s units to its %s entries", drop.pk, moved, queue.drawn_entries)
    holds.offer_after_commit(drop.pk)
    transaction.on_commit(lambda: state.refresh([drop.pk]))


START_AHEAD = timedelta(seconds=2)  # a start this close gets its own wave, timed to the instant
START_WAVE = "fg:queue:{drop}:start-wave:{at}"


def schedule_start_wave(drop: Drop, now: datetime) -> bool:
    """Run the draw and the first wave at the start itself, not at the next tick (up to a second
    later while the whole line waits): a task with the start as its ETA, sent once per start."""
    if not (drop.waiting_room and not drop.paused and now < drop.starts_at <= now + START_AHEAD):
        return False
    key = START_WAVE.format(drop=drop.pk, at=int(drop.starts_at.timestamp() * 1000))
    try:
        if not get_redis_connection("default").set(key, "1", nx=True, ex=600):
            return False
    except (RedisError, OSError):
        return False  # the tick after the start runs the wave anyway
    current_app.send_task("admission.start_wave", args=[drop.pk], eta=drop.starts_at)
    return True


def start_wave(drop_id: int) -> Wave | None:
    """The task sent by schedule_start_wave: the draw and first wave, as soon as the drop is live."""
    drop = Drop.objects.select_related("product").filter(pk=drop_id).first()
    if drop is None:
        return None  # deleted since
    early = (drop.starts_at - timezone.now()).total_seconds()
    if 0 <= early < START_AHEAD.total_seconds():
        time.sleep(early + 0.005)  # this worker's clock may run a little behind the scheduler's
    wave = run_wave(drop)
    # The list closed; the order waits for its beacon round, due a few seconds after the start.
    due = round_due_at(drop)
    wait = (due - timezone.now()).total_seconds() if due is not None else -1.0
    if wave is None and 0 <= wait <= ROUND_WAIT.total_seconds():
        time.sleep(wait + 0.05)
        wave = run_wave(drop)
    return wave


def tick(*, now: datetime | None = None) -> dict[str, int]:
    """Once a second (beat): run the waves that are due, then publish every active drop's snapshot."""
    now = now or timezone.now()
    drops = catalogue.active_drops(now)
    waves = 0
    for drop in drops:
        schedule_start_wave(drop, now)
        if drop.waiting_room:
            try:
                waves += run_wave(drop, now=now) is not None
            except Exception:  # one drop's trouble must not stop the others' waves
                log.exception("admission: wave of drop %s failed", drop.pk)
    open_queues(drops, now=now)  # each seed's hash and beacon round published before anyone can join
    gate.reconcile(drops)  # the Redis gates' counts back to the database's, every second
    changed = 0
    try:
        changed = state.publish(state.compute(drops))
    except (RedisError, OSError) as error:
        log.warning("admission: cannot publish snapshots: %s", error)
    return {"drops": len(drops), "waves": waves, "changed": changed}


# Returned units, in line order (sale/offers.py makes the offers; the line is kept here) -----


@dataclass(frozen=True)
class Waiting:
    ticket: int  # the ticket's id (its offer's key)
    number: int
    buyer_id: int


def line_for_offers(drop: Drop) -> Queue | None:
    """The drop's queue row, locked until the caller's commit (waves wait), once it has been
    drawn; None before the draw, or with no waiting room (nobody has a place to be offered by)."""
    assert connection.in_atomic_block, "the offers and the mark they move commit together"
    if not drop.waiting_room:
        return None
    return Queue.objects.select_for_update().filter(pk=drop.pk, drawn_at__isnull=False).first()


def next_waiting(queue: Queue, *, limit: int) -> list[Waiting]:
    """The next `limit` tickets in line that never had a unit of this drop, in number order."""
    with connection.cursor() as cursor:
        cursor.execute(sql.NEXT_WAITING, {"drop": queue.pk, "limit": limit})
        return [Waiting(*row) for row in cursor.fetchall()]


def mark_offered(queue: Queue, *, through: int) -> None:
    """The line's offers have reached ticket `through`: it is admitted too (its page says "your
    turn", and a ticket past the old mark is no longer counted in line). A number handed out
    earlier whose join commits only now may still sit below it: the next offer goes to it."""
    queue.offered_through = max(queue.offered_through, through)
    queue.admitted_through = max(queue.admitted_through, through)
    queue.save(update_fields=["offered_through", "admitted_through"])
    transaction.on_commit(lambda: state.refresh([queue.pk]))


def check_admitted(*, drop: Drop, buyer_id: int, token: str | None) -> None:
    """The reserve path's gate for waiting-room drops: a valid token, checked without a query."""
    if drop.waiting_room:
        tokens.verify(token, drop_id=drop.pk, buyer_id=buyer_id)
