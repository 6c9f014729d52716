"""Catalogue reads for the storefront and the API."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from catalogue import answers
from core.errors import FloodgateError, Forbidden, InvalidVariant, NotFound, Unauthenticated, fill
from core.text import storable
from inventory.selectors import available_by_drop, variants_with_stock
from shop import sql
from shop.models import VARIANT_NAME_MAX, ApiToken, Drop, DropState, RehearsalBuyer, Variant


@dataclass(frozen=True)
class VariantView:
    variant: Variant
    remaining: int
    price_minor: int  # the size's own price, or the product's

    def answer(self, drop: Drop) -> answers.VariantOnSale:
        return answers.VariantOnSale(
            name=self.variant.name,
            price_minor=self.price_minor,
            remaining=self.remaining,
            sold_out=self.remaining == 0,
        )


@dataclass(frozen=True)
class DropView:
    drop: Drop
    state: DropState
    remaining: int
    variants: tuple[VariantView, ...] = ()

    @property
    def choosing(self) -> bool:
        """The buyer picks a variant: there are several."""
        return len(self.variants) > 1

    @property
    def prices_differ(self) -> bool:
        """Some size costs other than the rest: then every size is shown with its own price."""
        return len({v.price_minor for v in self.variants}) > 1

    @property
    def lowest_price(self) -> int:
        return min(v.price_minor for v in self.variants)

    @property
    def highest_price(self) -> int:
        return max(v.price_minor for v in self.variants)

    @property
    def sold_out(self) -> bool:
        return self.remaining == 0

    @property
    def on_sale(self) -> bool:
        """Live with units left: a buyer can reserve (or join the line) right now."""
        return self.state == DropState.LIVE and not self.sold_out

    @property
    def badge(self) -> str:
        if self.state == DropState.LIVE and self.sold_out:
            return "sold out"
        return str(self.state.value)

    @property
    def badge_label(self) -> str:
        """The badge's words in the page's language ("sold out", "ausverkauft")."""
        if self.badge == "sold out":
            return _("sold out")
        return str(self.state.label).lower()

    def answer(self) -> answers.Drop:
        drop = self.drop
        return answers.Drop(
            slug=drop.slug,
            title=drop.display_title,
            state=self.state,
            quantity=drop.quantity,
            remaining=self.remaining,
            sold_out=self.sold_out,
            starts_at=drop.starts_at,
            ends_at=drop.ends_at,
            waiting_room=drop.waiting_room,
            presale_starts_at=drop.presale_starts_at,
            price_minor=drop.product.price_minor,
            currency=drop.product.currency,
            per_buyer_limit=drop.per_buyer_limit,
            variants=[v.answer(drop) for v in self.variants],
        )

    def as_json(self) -> dict[str, object]:
        return self.answer().dump()


def _views(drops: list[Drop], now: datetime) -> list[DropView]:
    """The drops as buyers see them, with their variants: two queries for any number of drops."""
    ids = [d.pk for d in drops]
    remaining = available_by_drop(ids)
    sorts: dict[int, list[VariantView]] = {}
    by_id = {d.pk: d for d in drops}
    for variant, left in variants_with_stock(ids):
        price = variant.unit_price(by_id[variant.drop_id].product)
        sorts.setdefault(variant.drop_id, []).append(VariantView(variant, left, price))
    return [DropView(d, d.state_at(now), remaining[d.pk], tuple(sorts.get(d.pk, ()))) for d in drops]


def unknown_drop(slug: str) -> NotFound:
    """The one answer to a slug no drop has (every door says it the same way)."""
    return NotFound(fill(gettext_lazy("There is no drop called %(slug)s."), slug=repr(slug)))


def outsider(drop: Drop) -> FloodgateError:
    """The answer to a buyer outside the drop's audience (shop.sql.AUDIENCE): a rehearsal's copy
    does not exist for anyone but its own buyers; a rehearsal's account buys nothing real."""
    if drop.rehearsal_of_id is not None:
        return unknown_drop(drop.slug)
    return Forbidden(
        gettext_lazy("This account was made for a rehearsal; it takes part in that rehearsal only.")
    )


def check_audience(drop: Drop, *, buyer_id: int) -> None:
    """Unauthenticated for an account no longer active; outsider() for one that may not take part.
    The claim statements check the same rule themselves; this is for the doors before them."""
    refusal = audience(drop, [buyer_id]).get(buyer_id)
    if refusal is not None:
        raise refusal


def audience(drop: Drop, buyers: list[int]) -> dict[int, FloodgateError | None]:
    """check_audience for many buyers in one read: each buyer's refusal, or None if they may."""
    with connection.cursor() as cursor:
        cursor.execute(sql.MAY_TAKE_PART, {"drop": drop.pk, "buyers": buyers})
        may = dict(cursor.fetchall())
    inactive = Unauthenticated(gettext_lazy("This account is not active."))
    return {b: (inactive if b not in may else None if may[b] else outsider(drop)) for b in buyers}


def _visible(drop: Drop, buyer_id: int | None) -> bool:
    """A rehearsal's copy is seen by its own buyers only (no query for a real drop)."""
    return drop.rehearsal_of_id is None or (
        buyer_id is not None and RehearsalBuyer.objects.filter(user_id=buyer_id, drop_id=drop.pk).exists()
    )


def drop_for_claim(*, slug: str) -> Drop:
    """The drop row and its variants (no stock counts): what the reserve path needs."""
    drop = Drop.objects.prefetch_related("variants").filter(slug=slug).first()
    if drop is None:
        raise unknown_drop(slug)
    return drop


def drop_for_buyer(*, slug: str, buyer_id: int | None) -> Drop:
    """The drop (product loaded) as a buyer's pages see it (None: a visitor); NotFound for a
    rehearsal's copy unless it is theirs."""
    drop = Drop.objects.select_related("product").filter(slug=slug).first()
    if drop is None or not _visible(drop, buyer_id):
        raise unknown_drop(slug)
    return drop


def drop_view(*, slug: str, buyer_id: int | None) -> DropView:
    """The drop as its page and `GET /api/drops/<slug>` show it to this buyer, with its variants."""
    return _views([drop_for_buyer(slug=slug, buyer_id=buyer_id)], timezone.now())[0]


def variant_of(drop: Drop, name: object) -> Variant:
    """The variant a reserve asks for by name (None: the drop's only one), from the drop's
    prefetched variants; InvalidVariant names the choices when there is no such one, or none
    was named where there are several."""
    variants = list(drop.variants.all())
    names = [v.name for v in variants]
    if name is None:
        if len(variants) == 1:
            return variants[0]
        raise InvalidVariant(
            fill(gettext_lazy("Choose a variant: one of %(names)s."), names=", ".join(names)), variants=names
        )
    if not isinstance(name, str) or len(name) > VARIANT_NAME_MAX or not storable(name):
        raise InvalidVariant(
            fill(gettext_lazy("variant must be the name of one of %(names)s."), names=", ".join(names)),
            variants=names,
        )
    for variant in variants:
        if variant.name == name:
            return variant
    raise InvalidVariant(
        fill(
            gettext_lazy("This drop has no variant %(name)s: choose one of %(names)s."),
            name=repr(name),
            names=", ".join(names),
        ),
        variants=names,
    )


def on_sale(drop: Drop) -> bool:
    """Whether a buyer can reserve from this drop right now (live, units left): "reserve again"."""
    return _views([drop], timezone.now())[0].on_sale


def storefront(*, now: datetime | None = None) -> dict[str, list[DropView]]:
    """Drops grouped for the home page: live, upcoming, sold out, ended (recent first). Never a
    rehearsal's copy."""
    now = now or timezone.now()
    drops = list(Drop.objects.select_related("product").filter(rehearsal_of=None).order_by("starts_at"))
    groups: dict[str, list[DropView]] = {"live": [], "upcoming": [], "sold_out": [], "ended": []}
    for view in _views(drops, now):
        if view.state == DropState.ENDED:
            groups["ended"].insert(0, view)
        elif view.state == DropState.SCHEDULED:
            groups["upcoming"].append(view)
        elif view.sold_out:
            groups["sold_out"].append(view)
        else:
            groups["live"].append(view)
    return groups


def catalogue() -> answers.DropList:
    """Every drop as `GET /api/drops` lists it: in the home page's order (live, upcoming, sold out,
    ended with the most recent first), each as `GET /api/drops/<slug>` answers it."""
    return answers.DropList(drops=[view.answer() for group in storefront().values() for view in group])


def active_drops(now: datetime) -> list[Drop]:
    """Drops a tick looks after: starting (or their presale opening) within the hour, on sale, or
    ended in the last ten minutes."""
    soon = now + timedelta(hours=1)
    return list(
        Drop.objects.select_related("product").filter(
            Q(starts_at__lte=soon) | Q(presale_starts_at__lte=soon), ends_at__gte=now - timedelta(minutes=10)
        )
    )


def api_token_created_at(*, user_id: int) -> datetime | None:
    """When the buyer's bearer token was made; None when they have none."""
    return ApiToken.objects.filter(user_id=user_id).values_list("created_at", flat=True).first()
