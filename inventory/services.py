"""Stock writes: laying out a drop's stock rows, claiming units from them.

Inventory owns the claim: `claim()` takes units in whichever mode the drop is in, and
its SQL's GIVE_BACK / MARK_SOLD are how a hold's end moves them (holds/sql.py). Adding a
mode means a new branch here and in those fragments, nowhere else.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from django.db import IntegrityError, connection, transaction
from django.db.backends.utils import CursorWrapper
from django.utils.translation import gettext_lazy

from core import locks
from core.errors import (
    Busy,
    Detail,
    Ended,
    FloodgateError,
    InvalidInput,
    NotStarted,
    Paused,
    SoldOut,
    UnitTaken,
    VariantSoldOut,
    fill,
)
from inventory import sql
from inventory.models import StockBucket, Unit
from shop.models import InventoryMode, Variant

MAX_LABEL_LENGTH = 40


class Stocked(Protocol):
    """What inventory needs to know of a drop (shop.models.Drop is one)."""

    pk: int
    quantity: int
    inventory_mode: str
    bucket_count: int


class Sort(Protocol):
    """What inventory needs to know of a variant (shop.models.Variant is one)."""

    pk: int
    name: str
    position: int
    quantity: int


def bucket_range(drop: Stocked, variant: Sort) -> range:
    """The bucket indexes of a variant: `bucket_count` of them from position * bucket_count, so
    a hold's bucket_index (what GIVE_BACK and RESTOCK credit) is always one of its variant's."""
    first = variant.position * drop.bucket_count
    return range(first, first + drop.bucket_count)


def split_evenly(total: int, parts: int) -> list[int]:
    """Split `total` units over `parts` buckets, the remainder going to the first ones."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _check_labels(labels: list[str]) -> None:
    if len(set(labels)) != len(labels):
        raise InvalidInput(gettext_lazy("Unit labels must be unique."))
    if any(not label or len(label) > MAX_LABEL_LENGTH for label in labels):
        raise InvalidInput(
            fill(
                gettext_lazy("Each unit label needs 1 to %(max_label_length)s characters."),
                max_label_length=MAX_LABEL_LENGTH,
            )
        )


def configure_stock(*, drop: Stocked, variants: Sequence[Sort], unit_labels: list[str] | None = None) -> None:
    """Create the stock rows of a new drop, each variant's apart; runs inside the caller's
    transaction. Unit labels are given for a drop of one variant; several are numbered per
    variant ("M-1", "M-2", ...)."""
    assert connection.in_atomic_block, "configure_stock must run inside the drop's transaction"
    if drop.inventory_mode == InventoryMode.BUCKETS:
        if unit_labels:
            raise InvalidInput(gettext_lazy("Unit labels only apply to a drop in units mode."))
        short = [v.name for v in variants if v.quantity < drop.bucket_count]
        if short:
            raise InvalidInput(
                fill(
                    gettext_lazy("Each variant needs at least %(bucket_count)s units, one per bucket."),
                    bucket_count=drop.bucket_count,
                )
            )
        StockBucket.objects.bulk_create(
            StockBucket(drop_id=drop.pk, variant_id=variant.pk, index=i, available=n)
            for variant in variants
            for i, n in zip(
                bucket_range(drop, variant), split_evenly(variant.quantity, drop.bucket_count), strict=True
            )
        )
        return
    if unit_labels and len(variants) > 1:
        raise InvalidInput(
            gettext_lazy("Unit labels can be given for a drop of one variant; several are numbered.")
        )
    rows: list[Unit] = []
    for variant in variants:
        names = [numbered(variant.name, n) for n in range(1, variant.quantity + 1)]
        labels = unit_labels or names
        if len(labels) != variant.quantity:
            raise InvalidInput(
                fill(
                    gettext_lazy("%(value)s unit labels given for a quantity of %(quantity)s."),
                    value=len(labels),
                    quantity=variant.quantity,
                )
            )
        rows += [Unit(drop_id=drop.pk, variant_id=variant.pk, label=label, rank=0) for label in labels]
    _check_labels([unit.label for unit in rows])
    for rank, unit in enumerate(rows):
        unit.rank = rank
    Unit.objects.bulk_create(rows, batch_size=5000)


def numbered(variant_name: str, n: int) -> str:
    """The label of a numbered unit: "M-3" in a drop of several variants, "3" in one of one."""
    return f"{variant_name}-{n}" if variant_name else str(n)


def numbered_variant(label: str, names: Sequence[str]) -> str | None:
    """The variant a numbered unit's label names (`numbered`'s inverse), None when it names none.
    Unique: the part after the variant's name is digits only, so "A-1-2" is A-1's, not A's."""
    for name in names:
        rest = label.removeprefix(f"{name}-") if name else None
        if rest is not None and rest != label and rest.isdigit():
            return name
    return None


# Claims -----------------------------------------------------------------------------------

PROBES = 3


@dataclass(frozen=True)
class Taken:
    """What a claim took: units of a bucket, or labelled units; the variant where the claim chose it."""

    bucket_index: int | None
    labels: tuple[str, ...] = ()
    variant_id: int | None = None  # set where the claim chose it (a returned unit's)


def _refusal(
    cursor: CursorWrapper, *, drop_id: int, variant: Sort, quantity: int, presale: bool = False
) -> FloodgateError:
    """Why a claim found nothing: the sale window (for a presale claim, the presale's), else really
    no stock, else a busy tail."""
    available, in_drop, others, state, presale_open = sql.single(
        cursor, sql.STOCK_AND_WINDOW, {"drop": drop_id, "variant": variant.pk}
    )
    if presale and presale_open:
        state = "live"
    if state == "paused":
        return Paused(gettext_lazy("This sale is paused. It resumes shortly; your place is kept."))
    if state == "scheduled":
        return NotStarted(gettext_lazy("This drop has not started yet."))
    if state == "ended":
        return Ended(gettext_lazy("This drop has ended."))
    if available < quantity:
        return shortage(variant, quantity=quantity, left=int(available), in_drop=int(in_drop), others=others)
    return Busy(gettext_lazy("Units are being claimed right now; try again in a second."))


def shortage(variant: Sort, *, quantity: int, left: int, in_drop: int, others: list[str]) -> SoldOut:
    """The sold-out answer for a claim of `quantity` when its variant has `left` open units and the
    drop `in_drop` (`others`: the variants that still have some). "Sold out" is for the whole drop;
    a variant gone while others are left is VariantSoldOut, naming them."""
    if left and left < quantity:
        return SoldOut(fill(gettext_lazy("Only %(left)s left; ask for fewer."), left=left), remaining=left)
    if in_drop == 0 or not others:
        return SoldOut(gettext_lazy("Sold out. Units come back if a buyer does not pay in time."))
    return VariantSoldOut(
        fill(
            gettext_lazy("%(name)s is sold out; still on sale: %(names)s."),
            name=variant.name,
            names=", ".join(others),
        ),
        variant=variant.name,
        left=others,
    )


class StockScattered(Busy):
    """Enough units in total, but no free bucket can serve this quantity right now."""


def take_from_buckets(
    cursor: CursorWrapper, *, drop_id: int, variant: Sort, quantity: int, first: int, presale: bool = False
) -> Taken:
    """Claim `quantity` units from the drop's buckets: the first pick, then a few probes.

    Only the first pick may wait for a row lock; the probes skip locked rows, so this
    never waits while holding a lock. Raises the refusal when the drop is not open or
    really has too little left, and StockScattered when the rest is spread too thin
    or mid-claim (the caller collapses the buckets outside this transaction).
    """
    params = {"drop": drop_id, "variant": variant.pk, "q": quantity, "index": first, "presale": presale}
    row = sql.one(cursor, sql.TAKE_FROM_BUCKET, params)
    for _ in range(PROBES):
        if row is not None:
            return Taken(bucket_index=row[0])
        row = sql.one(cursor, sql.TAKE_FROM_ANY_BUCKET, params)
    if row is not None:
        return Taken(bucket_index=row[0])
    refusal = _refusal(cursor, drop_id=drop_id, variant=variant, quantity=quantity, presale=presale)
    if isinstance(refusal, Busy):
        raise StockScattered(refusal.detail)
    raise refusal


def collapse_buckets(*, drop_id: int, variant_id: int, quantity: int) -> int:
    """Gather a variant's remaining units into its first bucket (the tail of a sale); returns
    the index of a bucket that can now serve `quantity` if any can, the first one otherwise.

    Collapsers of a variant queue on an advisory lock; each one that finds a bucket already
    able to serve its quantity (the previous collapser's work) skips the collapse.
    """
    ids = {"drop": drop_id, "variant": variant_id}
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        locks.lock(cursor, locks.Namespace.COLLAPSE, variant_id)
        fullest = sql.one(cursor, sql.FULLEST_BUCKET, ids)
        if fullest is None:
            return 0
        index, available = fullest
        if available >= quantity:
            return int(index)
        levels = sql.all_rows(cursor, sql.COLLAPSE_BUCKETS, ids)
    return int(max(levels, key=lambda row: row[1])[0])


def take_units(
    cursor: CursorWrapper, *, drop_id: int, variant: Sort, quantity: int, hold_id: int, presale: bool = False
) -> Taken:
    """Claim the best `quantity` free units, skipping rows other claimers have locked.

    Units locked by other claimers are theirs in a moment, so short means sold out (they
    come back if those claims fail); never waits, so claims cannot form lock cycles.
    """
    params = {"drop": drop_id, "variant": variant.pk, "q": quantity, "hold": hold_id, "presale": presale}
    labels = [r[0] for r in sql.all_rows(cursor, sql.CLAIM_BEST_UNITS, params)]
    if len(labels) < quantity:
        refusal = _refusal(cursor, drop_id=drop_id, variant=variant, quantity=quantity, presale=presale)
        if isinstance(refusal, Busy):
            raise SoldOut(
                gettext_lazy(
                    "Sold out right now: the last units are being claimed. They come back if unpaid."
                )
            )
        raise refusal
    return Taken(bucket_index=None, labels=tuple(labels))


def take_named_unit(
    cursor: CursorWrapper, *, drop_id: int, variant: Sort, label: str, hold_id: int, presale: bool = False
) -> Taken:
    """Claim one chosen unit of the variant; taken (or being taken) is an immediate UnitTaken."""
    params = {"drop": drop_id, "variant": variant.pk, "label": label, "hold": hold_id, "presale": presale}
    row = sql.one(cursor, sql.CLAIM_NAMED_UNIT, params)
    if row is not None:
        return Taken(bucket_index=None, labels=(row[0],))
    refusal = _refusal(cursor, drop_id=drop_id, variant=variant, quantity=1, presale=presale)
    if isinstance(refusal, Paused | NotStarted | Ended):
        raise refusal
    if sql.one(cursor, sql.UNIT_LABEL_EXISTS, params) is None:
        if variant.name:
            missing = gettext_lazy("This drop has no unit %(label)s in %(variant)s.")
        else:
            missing = gettext_lazy("This drop has no unit %(label)s.")
        raise InvalidInput(fill(missing, label=repr(label), variant=variant.name))
    raise UnitTaken(
        fill(
            gettext_lazy("%(label)s is taken. Pick another, or let us choose the best available."),
            label=label,
        )
    )


def first_pick(drop: Stocked, variant: Sort) -> int | None:
    """Where a claim starts: a random bucket of the variant (spreads the crowd), None for unit rows."""
    if drop.inventory_mode == InventoryMode.BUCKETS:
        return random.choice(bucket_range(drop, variant))
    return None


def check_choice(drop: Stocked, *, unit: str | None, quantity: int) -> None:
    """A chosen unit is for a drop of labelled units, one at a time."""
    if unit is not None and (drop.inventory_mode != InventoryMode.UNITS or quantity != 1):
        raise InvalidInput(
            gettext_lazy("A unit can be chosen only in a drop of labelled units, one at a time.")
        )


def claim(
    cursor: CursorWrapper,
    *,
    drop: Stocked,
    variant: Sort,
    quantity: int,
    hold_id: int,
    first: int | None,
    unit: str | None,
    presale: bool = False,
) -> Taken:
    """Take `quantity` units for a hold inside the caller's transaction, in the drop's mode.

    The caller has written the hold row already (lock order: hold, then stock) and runs
    this last; `presale` only when it admitted the claim to the drop's presale (holds.presale).
    Refusals raise (SoldOut, UnitTaken, Paused, ...); StockScattered asks the caller to
    `collapse_buckets` outside its transaction and claim once more.
    """
    if drop.inventory_mode == InventoryMode.BUCKETS:
        start = bucket_range(drop, variant).start if first is None else first
        return take_from_buckets(
            cursor, drop_id=drop.pk, variant=variant, quantity=quantity, first=start, presale=presale
        )
    if unit is not None:
        return take_named_unit(
            cursor, drop_id=drop.pk, variant=variant, label=unit, hold_id=hold_id, presale=presale
        )
    return take_units(
        cursor, drop_id=drop.pk, variant=variant, quantity=quantity, hold_id=hold_id, presale=presale
    )


@dataclass(frozen=True)
class BatchClaim:
    granted: dict[int, Taken]  # by hold id
    left: int | None  # the variant's free units after the batch, when a claim was not granted
    in_drop: int = 0  # and the drop's
    others: tuple[str, ...] = ()  # and the variants that still have some

    def refusal(self, variant: Sort, quantity: int) -> SoldOut | None:
        """The answer for an ungranted claim of `quantity`: sold out (or only so many left) when
        the free units cannot serve it; None when they could (the single path's to take)."""
        left = self.left or 0
        if left >= quantity:
            return None
        return shortage(variant, quantity=quantity, left=left, in_drop=self.in_drop, others=list(self.others))


def claim_batch(
    cursor: CursorWrapper, *, drop: Stocked, variant: Sort, holds: list[tuple[int, int]], first: int | None
) -> BatchClaim:
    """Take units for many holds (hold id, quantity), in their order.

    As `claim()`: inside the caller's transaction, after its hold rows; one statement grants
    the longest prefix the first bucket (or the free unit rows) covers, then other buckets
    that no claimer has locked serve the rest (as the single claim's probes). Raises the refusal
    (Paused, NotStarted, Ended) when the drop is not on sale.
    """
    quantity = dict(holds)
    granted: dict[int, Taken] = {}
    if drop.inventory_mode == InventoryMode.BUCKETS:
        start = bucket_range(drop, variant).start if first is None else first
        params = {"drop": drop.pk, "variant": variant.pk, "index": start}
        row = sql.one(cursor, sql.TAKE_BATCH_FROM_BUCKET, {**params, **_asks(holds)})
        if row is None:
            raise _refusal(cursor, drop_id=drop.pk, variant=variant, quantity=1)
        granted |= {hold: Taken(bucket_index=start) for hold in row[0]}
        for _ in range(drop.bucket_count - 1):  # never waits: each skips locked buckets
            rest = [(hold, quantity[hold]) for hold, _ in holds if hold not in granted]
            if not rest:
                break
            row = sql.one(cursor, sql.TAKE_BATCH_FROM_ANY_BUCKET, {**params, **_asks(rest)})
            if row is None:
                break
            granted |= {hold: Taken(bucket_index=row[2]) for hold in row[0]}
    else:
        _seen, labels = sql.single(
            cursor, sql.CLAIM_BATCH_UNITS, {"drop": drop.pk, "variant": variant.pk, **_asks(holds)}
        )
        granted = {int(hold): Taken(bucket_index=None, labels=tuple(got)) for hold, got in labels.items()}
    if len(granted) == len(holds):
        return BatchClaim(granted, None)
    ids = {"drop": drop.pk, "variant": variant.pk}
    available, in_drop, others, state, _presale = sql.single(cursor, sql.STOCK_AND_WINDOW, ids)
    if state != "live":
        raise _refusal(cursor, drop_id=drop.pk, variant=variant, quantity=1)
    return BatchClaim(granted, int(available), int(in_drop), tuple(others))


def _asks(holds: list[tuple[int, int]]) -> dict[str, list[int]]:
    return {"holds": [hold for hold, _ in holds], "qs": [quantity for _, quantity in holds]}


# Returned units (a waiting-room drop's, GIVE_BACK): only sale/offers.py takes them, under
# the drop's WAVE lock, one to each of the line's next tickets.


def returned_units(cursor: CursorWrapper, *, drop_id: int) -> int:
    return int(sql.single(cursor, sql.RETURNED_UNITS, {"drop": drop_id})[0])


@dataclass(frozen=True)
class Pool:
    """Returned units that can go to one hold together: one bucket's, or one variant's unit rows."""

    bucket_index: int | None
    variant_id: int
    units: int


def returned_pools(cursor: CursorWrapper, *, drop_id: int) -> list[Pool]:
    """The drop's returned units, pool by pool, in the order they are offered (read only)."""
    return [
        Pool(index, variant, int(n))
        for index, variant, n in sql.all_rows(cursor, sql.RETURNED_POOLS, {"drop": drop_id})
    ]


def take_returned(
    cursor: CursorWrapper, *, drop: Stocked, offers: list[tuple[int, int, Pool]]
) -> dict[int, Taken]:
    """For each new hold (hold, units, pool), in order, that many returned units of its pool (after
    the holds' rows: lock order); the holds not in the answer got none (cannot happen under the
    WAVE lock, where only the offerer takes returned units)."""
    params = {"drop": drop.pk}
    if drop.inventory_mode == InventoryMode.BUCKETS:
        wanted: dict[int, int] = {}
        for _, units, pool in offers:
            assert pool.bucket_index is not None
            wanted[pool.bucket_index] = wanted.get(pool.bucket_index, 0) + units
        there: dict[int, int] = dict(sql.all_rows(cursor, sql.LOCK_RETURNED_BUCKETS, params))
        if any(there.get(index, 0) < n for index, n in wanted.items()):
            return {}
        counts = {"indexes": list(wanted), "ns": list(wanted.values())}
        if len(sql.all_rows(cursor, sql.TAKE_RETURNED, {**params, **counts})) != len(wanted):
            return {}
        return {
            hold: Taken(bucket_index=pool.bucket_index, variant_id=pool.variant_id)
            for hold, _, pool in offers
        }
    asks = {
        "holds": [hold for hold, _, _ in offers],
        "qs": [units for _, units, _ in offers],
        "variants": [pool.variant_id for _, _, pool in offers],
    }
    labels: dict[int, list[str]] = {}
    for hold, label in sql.all_rows(cursor, sql.TAKE_RETURNED_UNITS, {**params, **asks}):
        labels.setdefault(hold, []).append(label)
    got = {hold: units for hold, units, _ in offers}
    return {
        hold: Taken(bucket_index=None, labels=tuple(labels[hold]), variant_id=pool.variant_id)
        for hold, _, pool in offers
        if len(labels.get(hold, ())) == got[hold]
    }


def exchange(
    cursor: CursorWrapper,
    *,
    drop: Stocked,
    hold_id: int,
    quantity: int,
    old: tuple[int, int | None],
    new: Sort,
    line: bool,
) -> Taken:
    """A held hold's `quantity` units of variant old[0] (from bucket old[1]) given back, and as many
    of `new` taken for it, inside the caller's transaction (after the hold's row lock). The new ones
    come from what any claim may take and, with `line` (the caller holds the drop's WAVE lock), from
    the returned units of a waiting room, whose next tickets come after this hold's buyer.

    Only the hold's own units may be waited for; the new ones are taken skipping rows others have
    locked. Raises the claim's refusal (VariantSoldOut, Paused, ...), or Busy when the units left
    are mid-claim; the caller's rollback then leaves the hold as it was."""
    old_variant, old_index = old
    params = {"drop": drop.pk, "hold": hold_id, "q": quantity, "presale": False}
    if drop.inventory_mode == InventoryMode.BUCKETS:
        credit = {**params, "variant": old_variant, "index": old_index}
        if sql.one(cursor, sql.CREDIT_HOLD_BUCKET, credit) is None:
            raise RuntimeError(
                f"hold {hold_id}: no bucket {old_index} of variant {old_variant} to give back to"
            )
        taking = {**params, "variant": new.pk}
        for statement in [sql.TAKE_FROM_ANY_BUCKET] * PROBES + [sql.TAKE_RETURNED_FROM_ANY_BUCKET] * line:
            row = sql.one(cursor, statement, taking)
            if row is not None:
                return Taken(bucket_index=row[0], variant_id=new.pk)
    else:
        freed = sql.all_rows(cursor, sql.FREE_HOLD_UNITS, {**params, "variant": old_variant})
        if len(freed) != quantity:
            raise RuntimeError(f"hold {hold_id}: {len(freed)} of its {quantity} units to give back")
        taken = [r[0] for r in sql.all_rows(cursor, sql.CLAIM_BEST_UNITS, {**params, "variant": new.pk})]
        if len(taken) == quantity:
            return Taken(bucket_index=None, labels=tuple(taken), variant_id=new.pk)
        if line and not taken:
            asks = {"holds": [hold_id], "qs": [quantity], "variants": [new.pk]}
            got = [r[1] for r in sql.all_rows(cursor, sql.TAKE_RETURNED_UNITS, {**params, **asks})]
            if len(got) == quantity:
                return Taken(bucket_index=None, labels=tuple(got), variant_id=new.pk)
    raise _refusal(cursor, drop_id=drop.pk, variant=new, quantity=quantity)


def open_returned(cursor: CursorWrapper, *, drop_id: int) -> int:
    """Make the drop's returned units open to any claim; returns how many."""
    return int(sql.single(cursor, sql.OPEN_RETURNED, {"drop": drop_id})[0])


def return_open(cursor: CursorWrapper, *, drop_id: int) -> int:
    """Move the drop's open units to its line (a raffle's draw: the ranked entries get them as
    offers, in order); returns how many. Runs inside the caller's transaction."""
    assert connection.in_atomic_block, "the units move with the draw that ranks who gets them"
    return int(sql.single(cursor, sql.RETURN_OPEN, {"drop": drop_id})[0])


def change_quantity(
    *, drop: Stocked, quantity: int, new_labels: list[str] | None = None, variant: Sort | None = None
) -> int:
    """Set a variant's quantity (None: the drop's only one), moving its stock rows and the drop's
    quantity by the same amount in one transaction.

    Never below what is held plus sold: only free units can be taken away. Units mode
    takes new labels (or numbers them on from the last). Returns the drop's new quantity.
    """
    if variant is None:
        only = list(Variant.objects.filter(drop_id=drop.pk)[:2])
        if len(only) != 1:
            raise InvalidInput(
                gettext_lazy("This drop has several variants: change the quantity of one of them.")
            )
        variant = only[0]
    if quantity < 1:
        raise InvalidInput(gettext_lazy("Quantity must be at least 1."))
    if drop.inventory_mode == InventoryMode.BUCKETS and quantity < drop.bucket_count:
        raise InvalidInput(
            fill(
                gettext_lazy("Use at least %(bucket_count)s units, one per bucket."),
                bucket_count=drop.bucket_count,
            )
        )
    try:
        with transaction.atomic(), connection.cursor() as cursor:  # the caller's, when it has one
            sql.single(cursor, sql.LOCK_DROP_QUANTITY, {"drop": drop.pk})
            (current,) = sql.single(cursor, sql.VARIANT_QUANTITY, {"drop": drop.pk, "variant": variant.pk})
            delta = quantity - current
            new_quantity = (
                _move_stock(cursor, drop=drop, variant=variant, delta=delta, new_labels=new_labels)
                if delta
                else drop.quantity
            )
    except IntegrityError:
        raise InvalidInput(gettext_lazy("A new unit label is already used in this drop.")) from None
    drop.quantity = new_quantity
    variant.quantity = quantity
    return new_quantity


def _move_stock(
    cursor: CursorWrapper, *, drop: Stocked, variant: Sort, delta: int, new_labels: list[str] | None
) -> int:
    ids = {"drop": drop.pk, "variant": variant.pk, "delta": delta}
    short = InvalidInput(
        fill(
            gettext_lazy(
                "Cannot remove %(value)s units: only units nobody holds or bought can be taken away."
            ),
            value=-delta,
        )
    )
    if drop.inventory_mode == InventoryMode.BUCKETS:
        if not sql.all_rows(cursor, sql.RESIZE_BUCKETS, ids):
            raise short
    elif delta < 0:
        if len(sql.all_rows(cursor, sql.REMOVE_FREE_UNITS, {**ids, "n": -delta})) < -delta:
            raise short
    else:
        first = sql.single(cursor, sql.NEXT_UNIT_RANK, ids)[0]
        prefix = f"{variant.name}-" if variant.name else ""
        labels = new_labels or [f"{prefix}{first + n + 1}" for n in range(delta)]
        if len(labels) != delta:
            raise InvalidInput(
                fill(
                    gettext_lazy("%(value)s new labels given for %(delta)s new units."),
                    value=len(labels),
                    delta=delta,
                )
            )
        _check_labels(labels)
        Unit.objects.bulk_create(
            Unit(drop_id=drop.pk, variant_id=variant.pk, label=label, rank=first + n)
            for n, label in enumerate(labels)
        )
    return int(sql.single(cursor, sql.MOVE_QUANTITY, ids)[0])


def relayout_stock(*, drop: Stocked, inventory_mode: str, bucket_count: int) -> None:
    """Give a scheduled, unclaimed drop a new stock layout (mode, bucket count).

    Refused once the sale has started or any hold exists (the database clock decides). Runs in
    the caller's transaction when it has one (catalogue.services.change_drop's).
    """
    with transaction.atomic(), connection.cursor() as cursor:
        clear_stock(drop=drop, why=gettext_lazy("Mode and bucket count"))
        cursor.execute(sql.SET_LAYOUT, {"drop": drop.pk, "mode": inventory_mode, "buckets": bucket_count})
        drop.inventory_mode, drop.bucket_count = inventory_mode, bucket_count
        configure_stock(drop=drop, variants=list(Variant.objects.filter(drop_id=drop.pk)))


def clear_stock(*, drop: Stocked, why: Detail) -> None:
    """Inside the caller's transaction: lock a drop that has not started and whose every unit is
    open (the database clock decides), and delete its stock rows for a new layout. InvalidInput
    (`why` "are fixed ...") when it has started or has holds."""
    assert connection.in_atomic_block, "clear_stock must run inside the new layout's transaction"
    with connection.cursor() as cursor:
        if sql.one(cursor, sql.LOCK_UNSTARTED_UNCLAIMED_DROP, {"drop": drop.pk}) is None:
            raise InvalidInput(
                fill(gettext_lazy("%(why)s are fixed once the drop has started or has holds."), why=why)
            )
    StockBucket.objects.filter(drop_id=drop.pk).delete()
    Unit.objects.filter(drop_id=drop.pk).delete()


LABEL_RANGE = re.compile(r"^(?P<prefix>[^\d\s]*)(?P<first>\d+)\s*-\s*(?P=prefix)?(?P<last>\d+)$")
MAX_UNITS_PER_RANGE = 100_000


def parse_labels(text: str) -> list[str]:
    """Turn "A1-A20, B1-B20, VIP" (commas, new lines or CSV cells) into unit labels, in order."""
    labels: list[str] = []
    for raw in re.split(r"[,;\n\r\t]+", text):
        item = raw.strip().strip('"').strip()
        if not item:
            continue
        match = LABEL_RANGE.match(item)
        if match is None:
            labels.append(item)
            continue
        first, last = int(match["first"]), int(match["last"])
        if last < first or last - first >= MAX_UNITS_PER_RANGE:
            raise InvalidInput(
                fill(
                    gettext_lazy("The range %(item)s must count up, at most %(max_units_per_range)s units."),
                    item=repr(item),
                    MAX_UNITS_PER_RANGE=format(MAX_UNITS_PER_RANGE, ","),
                )
            )
        width = len(match["first"]) if match["first"].startswith("0") else 0
        labels += [f"{match['prefix']}{n:0{width}d}" for n in range(first, last + 1)]
    _check_labels(labels)
    return labels
