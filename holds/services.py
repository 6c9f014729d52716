"""The hold lifecycle: reserve, extend, confirm, release, expire.

Every transition is one conditional statement on the hold's current state; the
statement that ends a hold also gives its units back, so a unit returns once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import string
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any

from celery import current_app
from django.db import OperationalError, connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone
from django.utils.translation import gettext_lazy
from django_redis import get_redis_connection

from catalogue import selectors as catalogue
from core import locks, metrics
from core.errors import (
    Busy,
    Ended,
    FloodgateError,
    HoldExists,
    HoldNotActive,
    IdempotencyKeyReused,
    InvalidIdempotencyKey,
    InvalidQuantity,
    LimitReached,
    MoreTimeUsed,
    NotStarted,
    Paused,
    SoldOut,
    Unauthenticated,
    UnitTaken,
    fill,
)
from holds import discounts, gate, presale, sql
from holds.models import IDEMPOTENCY_KEY_MAX, MORE_TIME_MAX, DiscountCode, Hold, HoldState
from inventory import services as stock
from shop.models import Drop, DropState, Variant
from shop.sql import MAY_TAKE_PART

log = logging.getLogger(__name__)

RECLAIM_BATCH = 500
KEY_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-_.:")


class OverdueHoldInTheWay(HoldExists):
    """The buyer's active hold has expired but is not reclaimed yet."""


@dataclass(frozen=True)
class Reservation:
    hold: Hold
    created: bool
    units: tuple[str, ...] | None = None  # the labels claimed, when new (None: look them up)


def check_idempotency_key(key: str | None) -> str:
    if not key:
        raise InvalidIdempotencyKey(
            gettext_lazy("Send an Idempotency-Key header (any unique string up to 64 characters).")
        )
    if len(key) > IDEMPOTENCY_KEY_MAX or not set(key) <= KEY_CHARACTERS:
        raise InvalidIdempotencyKey(
            fill(
                gettext_lazy(
                    "The Idempotency-Key must be 1-%(idempotency_key_max)s characters of letters, "
                    "digits, '-_.:'."
                ),
                idempotency_key_max=IDEMPOTENCY_KEY_MAX,
            )
        )
    return key


def request_digest(*, quantity: int, unit: str | None, variant: str = "", discount: str | None = None) -> str:
    """What a reserve asked for, as stored beside its Idempotency-Key (the body's meaning,
    not its bytes: spacing or key order of the JSON do not make another request). A drop's one
    unnamed variant adds nothing, nor does no discount code, so keys kept from before variants
    and codes mean what they meant."""
    asked: list[int | str | dict[str, str] | None] = [quantity, unit, *([variant] if variant else [])]
    if discount is not None:
        asked.append({"discount": discount})
    return hashlib.sha256(json.dumps(asked).encode()).hexdigest()


def check_quantity(drop: Drop, quantity: object) -> int:
    if isinstance(quantity, bool) or not isinstance(quantity, int):
        raise InvalidQuantity(
            fill(
                gettext_lazy("quantity must be a whole number from 1 to %(per_buyer_limit)s."),
                per_buyer_limit=drop.per_buyer_limit,
            )
        )
    if quantity < 1:
        raise InvalidQuantity(gettext_lazy("quantity must be at least 1."))
    if quantity > drop.per_buyer_limit:
        raise LimitReached(
            fill(
                gettext_lazy("At most %(per_buyer_limit)s per buyer in this drop."),
                per_buyer_limit=drop.per_buyer_limit,
            )
        )
    return quantity


def refuse_if_closed(drop: Drop, *, presale_ok: bool = False) -> None:
    """Cheap early answer from the row already loaded; the claim SQL decides for real. With
    `presale_ok` (Django's single claim, which admits presale claims) the presale window lets the
    claim through: its transaction spends the code or finds the buyer on the list."""
    state = drop.state
    if state == DropState.PAUSED:
        raise Paused(gettext_lazy("This sale is paused. It resumes shortly."))
    if state == DropState.SCHEDULED and drop.in_presale:
        if presale_ok:
            return
        raise presale.refused_before_start(drop)
    if state == DropState.SCHEDULED:
        raise NotStarted(
            fill(
                gettext_lazy("This drop opens at %(starts_at)s UTC."),
                starts_at=format(drop.starts_at, "%H:%M:%S"),
            ),
            starts_at=drop.starts_at.isoformat(),
        )
    if state == DropState.ENDED:
        raise Ended(gettext_lazy("This drop has ended."))


def reserve(
    *,
    drop: Drop,
    buyer_id: int,
    quantity: object,
    idempotency_key: str | None,
    unit: str | None = None,
    variant: Variant | None = None,
    presale_code: str | None = None,
    discount_code: str | None = None,
) -> Reservation:
    """Hold `quantity` units of `drop` (of `variant`; None: its only one) for the buyer; the same key
    again returns the same hold. In the drop's presale window the claim spends `presale_code`
    (checked by presale.code_of), or without one needs the buyer on the drop's list; outside it
    the code is not used. A `discount_code` (checked by discounts.code_of) is spent in the same
    transaction: refused, nothing is held.

    One short transaction: insert the hold, check the buyer's limit, claim stock (hot row
    last). A sold-out answer first reclaims the drop's expired holds and tries once more.
    Every answer is counted with its latency (core.metrics: one Redis round trip).
    """
    started = time.perf_counter()
    outcome = "error"
    claim = partial(
        _reserve,
        drop=drop,
        variant=variant,
        buyer_id=buyer_id,
        quantity=quantity,
        idempotency_key=idempotency_key,
        unit=unit,
        presale_code=presale_code,
        discount_code=discount_code,
    )
    try:
        if drop.redis_gate:  # a Redis count answers most "sold out"s; the claim still decides
            result = gate.through(
                drop, buyer_id=buyer_id, quantity=quantity, key=idempotency_key, claim=claim
            )
        else:
            result = claim()
        outcome = "held" if result.created else "repeated"
        return result
    except FloodgateError as error:
        outcome = error.code
        raise
    finally:
        metrics.observe_reserve(drop_id=drop.pk, outcome=outcome, seconds=time.perf_counter() - started)


def ask(
    *,
    drop: Drop,
    variant: Variant,
    buyer_id: int,
    quantity: object,
    idempotency_key: str | None,
    presale_code: object = None,
    discount_code: object = None,
) -> Ask:
    """A claim's key, quantity, presale and discount codes checked (400 / 422 / 403 otherwise),
    ready for a batch or `reserve` (a claim with a discount code is `reserve`'s)."""
    key = check_idempotency_key(idempotency_key)  # the key first, as buyers have always been told
    checked = check_quantity(drop, quantity)
    code = presale.code_of(presale_code)
    discount = discounts.code_of(discount_code)
    return Ask(
        buyer_id=buyer_id,
        quantity=checked,
        key=key,
        variant=variant,
        presale_code=code,
        discount_code=discount,
    )


def _reserve(
    *,
    drop: Drop,
    variant: Variant | None,
    buyer_id: int,
    quantity: object,
    idempotency_key: str | None,
    unit: str | None,
    presale_code: str | None,
    discount_code: str | None,
) -> Reservation:
    variant = variant or catalogue.variant_of(drop, None)  # after the gate: its "no" needs no query
    checked = ask(
        drop=drop,
        variant=variant,
        buyer_id=buyer_id,
        quantity=quantity,
        idempotency_key=idempotency_key,
        presale_code=presale_code,
        discount_code=discount_code,
    )
    q = checked.quantity
    stock.check_choice(drop, unit=unit, quantity=q)
    refuse_if_closed(drop, presale_ok=True)
    attempt = partial(_reserve_once, drop=drop, ask=checked, unit=unit)
    try:
        return attempt()
    except (SoldOut, UnitTaken, OverdueHoldInTheWay) as refusal:
        # Expired holds not yet reclaimed may be what stands in the way: reclaim, try once more.
        # In a waiting room their units go to the line, not to this claim: only the buyer's own
        # overdue hold is worth it there.
        if drop.waiting_room and not isinstance(refusal, OverdueHoldInTheWay):
            raise
        if reclaim_expired(drop_id=drop.pk) == 0:
            raise
        return attempt()
    except stock.StockScattered:
        # The tail: gather the last units into one bucket (its own transaction) and try once
        # more there. Still nothing free: what is left is mid-claim by others, as in units mode.
        first = stock.collapse_buckets(drop_id=drop.pk, variant_id=variant.pk, quantity=q)
    try:
        return attempt(first=first)
    except stock.StockScattered:
        raise SoldOut(
            gettext_lazy("Sold out right now: the last units are being claimed. They come back if unpaid.")
        ) from None


def _reserve_once(*, drop: Drop, ask: Ask, unit: str | None, first: int | None = None) -> Reservation:
    buyer_id, quantity, key, variant = ask.buyer_id, ask.quantity, ask.key, ask.variant
    assert variant is not None, "a claim knows its variant"
    if first is None:
        first = stock.first_pick(drop, variant)
    ids: dict[str, Any] = {"drop": drop.pk, "buyer": buyer_id, "key": key}
    digest = request_digest(quantity=quantity, unit=unit, variant=variant.name, discount=ask.discount_code)
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        params = {**ids, "variant": variant.pk, "q": quantity, "index": first, "digest": digest}
        cursor.execute(sql.INSERT_HOLD, params)
        row = cursor.fetchone()
        if row is None:
            cursor.execute(MAY_TAKE_PART, {"drop": drop.pk, "buyers": [buyer_id]})
            eligible = cursor.fetchone()
            if eligible is None:
                raise Unauthenticated(gettext_lazy("This account is not active: it cannot reserve."))
            if not eligible[1]:
                raise catalogue.outsider(drop)
            cursor.execute(sql.FIND_BY_KEY, ids)
            again = cursor.fetchone()
            if again is not None:
                if again[1] and again[1] != digest:
                    raise IdempotencyKeyReused(
                        gettext_lazy(
                            "This Idempotency-Key was used for another request; use a new key for a new one."
                        )
                    )
                return Reservation(Hold.objects.get(pk=again[0]), created=False)
            cursor.execute(sql.FIND_ACTIVE, ids)
            active = cursor.fetchone()
            if active is None:
                if not Drop.objects.filter(pk=drop.pk).exists():  # deleted since the caller read it
                    raise catalogue.unknown_drop(drop.slug)
                raise HoldExists(
                    gettext_lazy("Another request of yours is reserving in this drop right now."), hold=None
                )
            error = OverdueHoldInTheWay if active[1] else HoldExists
            raise error(
                "You already hold units of this drop; pay for them or release them first.", hold=active[0]
            )
        hold_id, created_at, expires_at = row
        cursor.execute(sql.BUYER_UNITS, ids)
        if cursor.fetchone()[0] > drop.per_buyer_limit:
            raise LimitReached(
                fill(
                    gettext_lazy(
                        "At most %(per_buyer_limit)s per buyer in this drop, counting what you bought."
                    ),
                    per_buyer_limit=drop.per_buyer_limit,
                )
            )
        # Before the public start (on this process's clock; the claim statement checks the window on
        # the database's): a code spent or the list, after the hold row and before the stock.
        in_presale = drop.state == DropState.SCHEDULED
        if in_presale:
            presale.admit(cursor, drop=drop, hold_id=hold_id, buyer_id=buyer_id, code=ask.presale_code)
        # A discount code's use, after the hold row and a presale code's, before the stock.
        spent = None
        if ask.discount_code is not None:
            spent = discounts.spend(cursor, drop=drop, hold_id=hold_id, code=ask.discount_code)
        # The stock row is touched last: its lock is held only until this commit.
        claim = stock.claim(
            cursor,
            drop=drop,
            variant=variant,
            quantity=quantity,
            hold_id=hold_id,
            first=first,
            unit=unit,
            presale=in_presale,
        )
        if claim.bucket_index != first:
            cursor.execute(sql.SET_BUCKET, {"index": claim.bucket_index, "hold": hold_id, "drop": drop.pk})
    made = _made(drop, ask, hold_id, claim.bucket_index, (created_at, expires_at), discount=spent)
    return Reservation(made, created=True, units=claim.labels)


def _made(
    drop: Drop,
    ask: Ask,
    hold_id: int,
    bucket: int | None,
    times: tuple[datetime, datetime],
    *,
    discount: DiscountCode | None = None,
) -> Hold:
    """A new hold built from what its statements returned (its id, created_at and expires_at):
    no read-back on the hot path. The single claim and the batch both make theirs here."""
    return Hold(
        pk=hold_id,
        drop=drop,
        variant=ask.variant,
        buyer_id=ask.buyer_id,
        quantity=ask.quantity,
        bucket_index=bucket,
        state=HoldState.HELD,
        idempotency_key=ask.key,
        created_at=times[0],
        expires_at=times[1],
        extended=False,
        discount_code=discount,
    )


@dataclass(frozen=True)
class Ask:
    """One claim of a batch, already checked (check_idempotency_key, check_quantity)."""

    buyer_id: int
    quantity: int
    key: str
    variant: Variant | None = None  # None: the drop's only one
    presale_code: str | None = None  # checked by presale.code_of; spent only in the presale window
    discount_code: str | None = None  # checked by discounts.code_of; the single claim spends it

    @property
    def digest(self) -> str:  # a batch claims no chosen unit
        variant = self.variant.name if self.variant is not None else ""
        return request_digest(quantity=self.quantity, unit=None, variant=variant, discount=self.discount_code)


Outcome = Reservation | FloodgateError | None  # a batch's claim; None: let `reserve` answer this one


def reserve_batch(*, drop: Drop, asks: Sequence[Ask]) -> list[Outcome]:
    """Hold units of one variant for many buyers of one drop in one short transaction, in arrival
    order (every ask is of the same variant).

    Every guarantee of `reserve` holds inside the batch: the holds are inserted first under
    the same unique rules (a key again, or a second active hold, conflicts), the per-buyer
    limit is counted after the insert, and stock is taken last by one conditional statement
    that checks the sale window (inventory's claim_batch). The holds that got no stock are
    discarded before the commit. None asks `reserve`: a conflict to look up, a claim another
    bucket might serve, or units a reclaim just gave back.
    """
    started = time.perf_counter()
    answers: list[Outcome] = [None] * len(asks)
    try:
        refuse_if_closed(drop)
    except FloodgateError as error:
        answers = [error] * len(asks)
        _observe(drop, answers, started)
        return answers
    variant = asks[0].variant or catalogue.variant_of(drop, None)
    assert all(ask.variant in (None, variant) for ask in asks), "a batch claims one variant's stock"
    assert all(ask.discount_code is None for ask in asks), "a discount code is the single claim's"
    asks = [replace(ask, variant=variant) for ask in asks]
    first = stock.first_pick(drop, variant)
    inserted: dict[int, tuple[int, datetime, datetime]] = {}  # ask index -> (hold, created, expires)
    try:
        with transaction.atomic(durable=True), connection.cursor() as cursor:
            params = {
                "drop": drop.pk,
                "variant": variant.pk,
                "index": first,
                "buyers": [ask.buyer_id for ask in asks],
                "qs": [ask.quantity for ask in asks],
                "keys": [ask.key for ask in asks],
                "digests": [ask.digest for ask in asks],
            }
            cursor.execute(sql.INSERT_HOLDS, params)
            eligible: dict[int, bool] = {}
            rows: dict[tuple[int, str], tuple[int, datetime, datetime]] = {}
            for kind, hold, buyer, may, key, created, expires in cursor:
                if kind == "buyer":
                    eligible[buyer] = may
                else:
                    rows[(buyer, key)] = (hold, created, expires)
            for i, ask in enumerate(asks):
                if ask.buyer_id not in eligible:
                    answers[i] = Unauthenticated(gettext_lazy("That bearer token is not valid."))
                elif not eligible[ask.buyer_id]:
                    answers[i] = catalogue.outsider(drop)
            active = {buyer for buyer, may in eligible.items() if may}
            for i, ask in enumerate(asks):  # a repeated (buyer, key) in the batch is the single path's
                if ask.buyer_id in active and (row := rows.pop((ask.buyer_id, ask.key), None)) is not None:
                    inserted[i] = row
            holds = [hold for hold, _, _ in inserted.values()]
            over: set[int] = set()
            if holds:
                cursor.execute(sql.OVER_LIMIT, {"drop": drop.pk, "holds": holds})
                over = {row[0] for row in cursor.fetchall()}
            wanting = [(inserted[i][0], asks[i].quantity) for i in inserted if inserted[i][0] not in over]
            # The stock rows are touched last: their lock is held only until this commit.
            batch = (
                stock.claim_batch(cursor, drop=drop, variant=variant, holds=wanting, first=first)
                if wanting
                else None
            )
            granted = batch.granted if batch is not None else {}
            if discard := [hold for hold in holds if hold not in granted]:
                cursor.execute(sql.DISCARD_HOLDS, {"drop": drop.pk, "holds": discard})
            if moved := {hold: c.bucket_index for hold, c in granted.items() if c.bucket_index != first}:
                cursor.execute(
                    sql.SET_BUCKETS, {"drop": drop.pk, "holds": list(moved), "indexes": list(moved.values())}
                )
    except FloodgateError as refusal:  # the drop is not on sale: nothing was kept
        for i in inserted:
            answers[i] = refusal
        _observe(drop, answers, started)
        return answers
    for i, (hold, created_at, expires_at) in inserted.items():
        ask = asks[i]
        if hold in over:
            answers[i] = LimitReached(
                fill(
                    gettext_lazy(
                        "At most %(per_buyer_limit)s per buyer in this drop, counting what you bought."
                    ),
                    per_buyer_limit=drop.per_buyer_limit,
                )
            )
        elif (claim := granted.get(hold)) is not None:
            made = _made(drop, ask, hold, claim.bucket_index, (created_at, expires_at))
            answers[i] = Reservation(made, created=True, units=claim.labels)
        elif batch is not None and (short := batch.refusal(variant, ask.quantity)) is not None:
            # Free units this claim would fit in (spread over buckets, or left after a larger
            # claim ahead of it was refused) are the single path's to take.
            answers[i] = short
    sold_out = any(isinstance(answer, SoldOut) for answer in answers)
    if sold_out and not drop.waiting_room and reclaim_expired(drop_id=drop.pk):  # (a room's go to its line)
        answers = [None if isinstance(answer, SoldOut) else answer for answer in answers]
    _observe(drop, answers, started)
    return answers


def _observe(drop: Drop, answers: Sequence[Outcome], started: float) -> None:
    seconds = time.perf_counter() - started
    decided = [
        ("held" if isinstance(answer, Reservation) else answer.code, seconds)
        for answer in answers
        if answer is not None
    ]
    metrics.observe_reserves(drop_id=drop.pk, answers=decided)


def release(*, hold_id: int, buyer_id: int | None) -> bool:
    """HELD -> RELEASED and its units back to stock; False if it was no longer held."""
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        changed = _release(cursor, hold_id=hold_id, buyer_id=buyer_id)
    return changed


def _release(cursor: CursorWrapper, *, hold_id: int, buyer_id: int | None) -> bool:
    cursor.execute(sql.RELEASE_HOLD, {"hold": hold_id, "buyer": buyer_id})
    changed, credited, line = cursor.fetchone()
    if changed:
        log.info("hold %s released, %s units back", hold_id, credited)
        offer_after_commit(line)
    return bool(changed)


def more_time(*, hold: Hold, buyer_id: int) -> Hold:
    """The buyer's "I need more time": half the hold's first window more (an offer's 90 s: 45 s), at
    most MORE_TIME_MAX times and only before payment starts. MoreTimeUsed when it has had them all,
    HoldNotActive when it ended or is being paid for; either way nothing changes."""
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        params = {"hold": hold.pk, "drop": hold.drop_id, "buyer": buyer_id, "most": MORE_TIME_MAX}
        cursor.execute(sql.MORE_TIME, params)
        if cursor.fetchone() is None:
            cursor.execute(sql.MORE_TIME_LEFT, params)
            if cursor.fetchone() is not None:
                raise MoreTimeUsed(gettext_lazy("This hold has had all the extra time it can have."))
            raise HoldNotActive(
                gettext_lazy("This hold cannot get more time: its payment has started, or it has ended.")
            )
    return Hold.objects.select_related("variant", "drop").get(pk=hold.pk)


def change_variant(*, hold: Hold, buyer_id: int, name: object) -> Hold:
    """Another variant (size) for the buyer's held hold whose payment has not started: its units
    given back and as many of the new one taken in one transaction, the time left unchanged. An
    offered returned unit or a raffle's win is a hold too, so its buyer chooses a size this way; in a
    waiting room the new units may be returned ones not yet offered (under the line's lock: the
    tickets they would go to come after this buyer). Refused (InvalidVariant, VariantSoldOut, Paused,
    HoldNotActive, Busy): the hold is as it was."""
    drop = catalogue.drop_for_claim(slug=hold.drop.slug)
    new = catalogue.variant_of(drop, name)
    refuse_if_closed(drop)
    try:
        with transaction.atomic(durable=True), connection.cursor() as cursor:
            cursor.execute(sql.OFFER_WAIT_TIMEOUT)  # behind a wave or an offerer a moment, never long
            if drop.waiting_room:
                locks.lock(cursor, locks.Namespace.WAVE, drop.pk)
            cursor.execute(
                sql.LOCK_HOLD_FOR_SIZE_CHANGE, {"hold": hold.pk, "drop": drop.pk, "buyer": buyer_id}
            )
            row = cursor.fetchone()
            if row is None:
                raise HoldNotActive(
                    gettext_lazy(
                        "This hold cannot change size now: its payment has started, or it has ended."
                    )
                )
            quantity, old_variant, old_index = row
            if old_variant != new.pk:
                claim = stock.exchange(
                    cursor,
                    drop=drop,
                    hold_id=hold.pk,
                    quantity=quantity,
                    old=(old_variant, old_index),
                    new=new,
                    line=drop.waiting_room,
                )
                params = {"hold": hold.pk, "drop": drop.pk, "variant": new.pk, "index": claim.bucket_index}
                cursor.execute(sql.SET_HOLD_VARIANT, params)
                log.info("hold %s: %s units from variant %s to %s", hold.pk, quantity, old_variant, new.pk)
                offer_after_commit(drop.pk if drop.waiting_room else None)  # the old ones, to the line
    except OperationalError as error:  # lock_timeout: a long wave, or the hold's own row in use
        raise Busy(gettext_lazy("The shop is busy right now; try again in a second.")) from error
    return Hold.objects.select_related("variant", "drop").get(pk=hold.pk)


OFFER_PENDING = "fg:offer:pending:{}"  # set while a sale.offer_now of the drop is on its way
OFFER_EXPIRES = 5  # seconds: an offer_now not started by then is dropped (beat's tick covers it)


def offer_after_commit(line_drop_id: int | None) -> None:
    """Units just went back to a waiting room's line: have them offered to the next tickets as
    soon as this commits (sale.offer_now), not on beat's next tick. Sent by name: the flow that
    offers builds on this layer. One send per drop at a time: a burst of returns shares the task
    on its way (it clears the flag before it reads what came back). Redis or the broker down, or
    a lost message: the tick's wait, never a failed release."""
    if line_drop_id is None:
        return

    def send() -> None:
        try:
            if get_redis_connection().set(OFFER_PENDING.format(line_drop_id), 1, nx=True, ex=OFFER_EXPIRES):
                current_app.send_task("sale.offer_now", args=(line_drop_id,), expires=OFFER_EXPIRES)
        except Exception as error:
            log.warning("drop %s: returned units wait for the tick (%s)", line_drop_id, error)

    transaction.on_commit(send)


def confirm(*, hold_id: int) -> bool:
    """HELD -> SOLD if the hold has not expired; False if it was not held any more (or expired)."""
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        return confirm_in(cursor, hold_id=hold_id)


def hold_for_payment(cursor: CursorWrapper, *, hold_id: int, buyer_id: int) -> tuple[int, int]:
    """Inside the payment's transaction: extend the buyer's live hold once and lock it.

    Returns (quantity, drop id); HoldNotActive when it is not the buyer's or no longer held.
    """
    assert connection.in_atomic_block, "hold_for_payment runs inside the payment's transaction"
    cursor.execute(sql.HOLD_FOR_PAYMENT, {"hold": hold_id, "buyer": buyer_id})
    row = cursor.fetchone()
    if row is None:
        raise HoldNotActive(
            gettext_lazy("This hold has ended: it expired or was released. Reserve again to buy.")
        )
    return row[0], row[1]


def confirm_in(cursor: CursorWrapper, *, hold_id: int) -> bool:
    """HELD -> SOLD inside the caller's transaction (the payment saga's)."""
    assert connection.in_atomic_block
    cursor.execute(sql.CONFIRM_HOLD, {"hold": hold_id})
    return bool(cursor.fetchone()[0])


def pin_for_settlement_in(cursor: CursorWrapper, *, hold_id: int, since: datetime, seconds: int) -> bool:
    """Keep a held hold until `seconds` after `since` (a payment authorised then and not yet
    applied), inside the caller's transaction; False if it had already ended."""
    assert connection.in_atomic_block
    cursor.execute(sql.PIN_FOR_SETTLEMENT, {"hold": hold_id, "since": since, "seconds": seconds})
    return cursor.fetchone() is not None


def release_in(cursor: CursorWrapper, *, hold_id: int) -> bool:
    """HELD -> RELEASED with its units back, inside the caller's transaction."""
    assert connection.in_atomic_block
    return _release(cursor, hold_id=hold_id, buyer_id=None)


def refund_units_in(cursor: CursorWrapper, *, hold_id: int, units: int, restock: bool) -> bool:
    """Count `units` more of a sold hold as refunded and, with restock, put them back on sale,
    inside the caller's transaction; False if the hold is not sold or has fewer left unrefunded."""
    assert connection.in_atomic_block
    cursor.execute(sql.REFUND_UNITS, {"hold": hold_id, "units": units, "restock": restock})
    changed, back, line = cursor.fetchone()
    if changed:
        log.info("hold %s: %s units refunded, %s back on sale", hold_id, units, back)
        offer_after_commit(line if back else None)
    return bool(changed)


def reclaim_expired(*, drop_id: int, limit: int = RECLAIM_BATCH) -> int:
    """Expire up to `limit` of the drop's overdue holds and credit their units; 0 if another
    reclaimer holds this drop right now (it is doing the same work)."""
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        if not locks.try_lock(cursor, locks.Namespace.RECLAIM, drop_id):
            return 0
        cursor.execute(sql.EXPIRE_DUE_HOLDS, {"drop": drop_id, "limit": limit})
        expired, credited = cursor.fetchone()
    if expired:
        log.info("drop %s: %s holds expired, %s units back in stock", drop_id, expired, credited)
    return int(expired)


def sweep_expired(*, max_drops: int = 50, max_batches: int = 20) -> int:
    """Reclaim overdue holds across drops in bounded batches; returns how many expired."""
    with connection.cursor() as cursor:
        cursor.execute(sql.DROPS_WITH_DUE_HOLDS, {"limit": max_drops})
        drop_ids = [row[0] for row in cursor.fetchall()]
    total = 0
    for drop_id in drop_ids:
        for _ in range(max_batches):
            done = reclaim_expired(drop_id=drop_id)
            total += done
            if done < RECLAIM_BATCH:
                break
    return total


def effective_state(hold: Hold) -> str:
    """What the buyer should be told: a held hold past its time is expired, reclaimed or not."""
    if hold.state == "held" and hold.expires_at <= timezone.now():
        return "expired"
    return hold.state
