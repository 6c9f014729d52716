"""Catalogue writes: creating and changing drops, API buyers and their bearer tokens."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation

from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.errors import InvalidInput
from inventory import selectors as stock
from inventory import services as inventory
from shop.models import (
    DEFAULT_JOIN_WORK_BITS,
    DEFAULT_LINE_CLOSE_SECONDS,
    MAX_VARIANTS,
    ApiToken,
    Drop,
    FeeBasis,
    InventoryMode,
    Product,
    RehearsalBuyer,
    ShippingZone,
    Variant,
)

log = logging.getLogger(__name__)


def _validation_message(error: ValidationError) -> str:
    if hasattr(error, "message_dict"):
        return "; ".join(
            f"{field}: {' '.join(messages)}" if field != "__all__" else " ".join(messages)
            for field, messages in error.message_dict.items()
        )
    return " ".join(error.messages)


def tax_rate_from(text: str) -> Decimal:
    """ "19" or "7.7" -> the Decimal percent a product keeps; garbage is InvalidInput (the range is the
    product's own validation, so the admin and create_drop say the same)."""
    refused = InvalidInput(f"The tax rate must be a number of percent such as 19 or 7.7 (got {text!r}).")
    try:
        rate = Decimal(text.strip())
    except InvalidOperation:
        raise refused from None
    if not rate.is_finite():  # "NaN", "Infinity" parse as Decimals
        raise refused
    return rate


@dataclass(frozen=True)
class NewVariant:
    name: str
    quantity: int
    price_minor: int | None = None  # None: the product's price


VARIANT_SPEC = "NAME:QUANTITY or NAME:QUANTITY:PRICE_MINOR, e.g. M:40 or XL:20:13900"


def variant_from(text: str) -> NewVariant:
    """ "M:40" or "XL:20:13900" (create_drop --variant) -> a NewVariant; garbage is InvalidInput."""
    parts = text.rsplit(":", 2) if text.count(":") >= 2 else text.rsplit(":", 1)
    try:
        if len(parts) == 3 and parts[2].strip().isdigit() and parts[1].strip().isdigit():
            return NewVariant(parts[0].strip(), int(parts[1]), int(parts[2]))
        if len(parts) == 2 and parts[1].strip().isdigit():
            return NewVariant(parts[0].strip(), int(parts[1]))
    except ValueError:
        pass
    raise InvalidInput(f"A variant is {VARIANT_SPEC} (got {text!r}).")


def check_variants(
    *,
    quantity: int,
    variants: list[NewVariant] | None,
    redis_gate: bool,
    inventory_mode: str = InventoryMode.BUCKETS,
    bucket_count: int = 1,
    unit_labels: bool = False,
) -> list[NewVariant]:
    """The variants a drop sells, checked before anything is written (create_drop, the admin's
    form, change_variants); none given: one, unnamed, of the whole quantity. InvalidInput says
    what is wrong in words a merchant reads beside the form."""
    if not variants:
        return [NewVariant("", quantity)]
    if len(variants) > MAX_VARIANTS:
        raise InvalidInput(f"A drop has at most {MAX_VARIANTS} variants.")
    names = [v.name for v in variants]
    if any(not name for name in names) or len(set(names)) != len(names):
        raise InvalidInput("Each variant needs a name of its own (e.g. S, M, L).")
    if any(v.quantity < 1 for v in variants):
        raise InvalidInput("Each variant needs at least 1 unit.")
    if sum(v.quantity for v in variants) != quantity:
        raise InvalidInput(
            f"The variants add up to {sum(v.quantity for v in variants)} units, not the drop's {quantity}."
        )
    if redis_gate and len(variants) > 1:
        raise InvalidInput("The Redis gate counts one stock: use it on a drop of one variant.")
    if inventory_mode == InventoryMode.BUCKETS and any(v.quantity < bucket_count for v in variants):
        raise InvalidInput(f"Each variant needs at least {bucket_count} units, one per bucket.")
    if inventory_mode == InventoryMode.UNITS and unit_labels and len(variants) > 1:
        raise InvalidInput("Unit labels can be given for a drop of one variant; several are numbered.")
    return variants


def change_variants(*, drop: Drop, variants: list[NewVariant]) -> list[Variant]:
    """Give a drop that has not started and that nobody holds any of a new set of variants (none:
    one stock of its current quantity), its stock laid out again and its quantity their sum.

    The drop row is locked first (inventory.clear_stock, which refuses a started or claimed drop
    under that lock); InvalidInput changes nothing. Runs in the caller's transaction when there
    is one (change_drop's)."""
    quantity = sum(v.quantity for v in variants) or drop.quantity
    sorts = check_variants(
        quantity=quantity,
        variants=variants,
        redis_gate=drop.redis_gate,
        inventory_mode=drop.inventory_mode,
        bucket_count=drop.bucket_count,
    )
    with transaction.atomic():
        inventory.clear_stock(drop=drop, why=gettext_lazy("Variants can be added, renamed or removed"))
        try:
            Variant.objects.filter(drop_id=drop.pk).delete()
        except ProtectedError:  # a hold of the past names one (the lock saw none open)
            raise InvalidInput("Variants are fixed once a buyer has held one: change quantities.") from None
        rows = Variant.objects.bulk_create(
            Variant(drop=drop, name=v.name, position=n, quantity=v.quantity, price_minor=v.price_minor)
            for n, v in enumerate(sorts)
        )
        Drop.objects.filter(pk=drop.pk).update(quantity=quantity)
        drop.quantity = quantity
        inventory.configure_stock(drop=drop, variants=rows)
    log.info("drop %s now sells %s variants", drop.pk, len(rows))
    return rows


ZONE_SPEC = "NAME:COUNTRIES:FEE_MINOR[:unit][:TAX_RATE], e.g. Germany:DE:490 or EU:AT,FR,NL:290:unit:19"


def zone_from(text: str) -> ShippingZone:
    """ "EU:AT,FR:290:unit:19" (create_drop --ship-zone) -> an unsaved zone, checked as the admin
    checks it; garbage is InvalidInput."""
    parts = [part.strip() for part in text.split(":")]
    refused = InvalidInput(f"A shipping zone is {ZONE_SPEC} (got {text!r}).")
    if not 3 <= len(parts) <= 5 or not parts[2].isdigit():
        raise refused
    rest = parts[3:]
    basis = FeeBasis.UNIT if rest and rest[0] == "unit" else FeeBasis.ORDER
    if rest and rest[0] in {"unit", "order"}:
        rest = rest[1:]
    if len(rest) > 1:
        raise refused
    zone = ShippingZone(
        name=parts[0],
        countries=[code.strip().upper() for code in parts[1].split(",") if code.strip()],
        fee_minor=int(parts[2]),
        fee_basis=basis,
        tax_rate=tax_rate_from(rest[0]) if rest else None,
    )
    try:
        zone.full_clean(exclude=["product"])
    except ValidationError as error:
        raise InvalidInput(_validation_message(error)) from None
    return zone


def check_zones(zones: list[ShippingZone]) -> None:
    """No country in two zones of one product (which fee would it pay?); InvalidInput names them."""
    named = [code for zone in zones for code in zone.countries]
    twice = sorted({code for code in named if named.count(code) > 1})
    if twice:
        raise InvalidInput(f"A country may be in one shipping zone only: {', '.join(twice)}.")


def create_drop(
    *,
    slug: str,
    quantity: int,
    starts_at: datetime,
    ends_at: datetime,
    product_sku: str,
    product_name: str,
    price_minor: int,
    currency: str = "EUR",
    tax_rate: Decimal = Decimal(0),
    ships: bool = False,
    title: str = "",
    inventory_mode: str = InventoryMode.BUCKETS,
    bucket_count: int = 1,
    hold_seconds: int = 480,
    offer_seconds: int = 90,
    per_buyer_limit: int = 2,
    waiting_room: bool = False,
    raffle: bool = False,
    admission_wave_seconds: int = 5,
    admission_percent: int = 150,
    join_work_bits: int = DEFAULT_JOIN_WORK_BITS,
    line_close_seconds: int = DEFAULT_LINE_CLOSE_SECONDS,
    draw_round_wait_seconds: int = 0,
    redis_gate: bool = False,
    unit_labels: list[str] | None = None,
    rehearsal_of: Drop | None = None,
    variants: list[NewVariant] | None = None,
    presale_starts_at: datetime | None = None,
    shipping_zones: list[ShippingZone] | None = None,
    exchange_closes_at: datetime | None = None,
    exchange_fee_minor: int = 0,
) -> Drop:
    """Create a drop (and its product if new) with its variants and their stock rows, and a new
    product's shipping zones; InvalidInput writes nothing. With `rehearsal_of`, it is that drop's
    hidden rehearsal copy from its first commit. Runs in the caller's transaction when there is
    one (the admin's add: a refusal there saves nothing)."""
    if quantity < 1:
        raise InvalidInput(f"Quantity must be at least 1 (got {quantity}).")
    sorts = check_variants(
        quantity=quantity,
        variants=variants,
        redis_gate=redis_gate,
        inventory_mode=inventory_mode,
        bucket_count=bucket_count,
        unit_labels=bool(unit_labels),
    )
    product = Product.objects.filter(sku=product_sku).first() or Product(
        sku=product_sku,
        name=product_name,
        price_minor=price_minor,
        currency=currency,
        tax_rate=tax_rate,
        ships=ships,
    )
    drop = Drop(
        product=product,
        slug=slug,
        title=title,
        quantity=quantity,
        starts_at=starts_at,
        ends_at=ends_at,
        presale_starts_at=presale_starts_at,
        inventory_mode=inventory_mode,
        bucket_count=bucket_count,
        hold_seconds=hold_seconds,
        offer_seconds=offer_seconds,
        per_buyer_limit=per_buyer_limit,
        waiting_room=waiting_room,
        raffle=raffle,
        admission_wave_seconds=admission_wave_seconds,
        admission_percent=admission_percent,
        join_work_bits=join_work_bits,
        line_close_seconds=line_close_seconds,
        draw_round_wait_seconds=draw_round_wait_seconds,
        redis_gate=redis_gate,
        rehearsal_of=rehearsal_of,
        exchange_closes_at=exchange_closes_at,
        exchange_fee_minor=exchange_fee_minor,
    )
    try:
        drop.full_clean(exclude=["product"])  # the drop's own fields first: a bad slug is the news
        if product.pk is None:
            product.full_clean()
    except ValidationError as error:
        raise InvalidInput(_validation_message(error)) from None
    if ends_at <= starts_at:
        raise InvalidInput("The drop must end after it starts.")
    if shipping_zones:
        if product.pk is not None:
            raise InvalidInput(f"Product {product_sku} exists: change its shipping zones in the admin.")
        if not ships:
            raise InvalidInput("Shipping zones are for a product that ships: give --ships too.")
        check_zones(shipping_zones)
    if bucket_count > quantity:
        raise InvalidInput(f"{bucket_count} buckets cannot split {quantity} units; use at most {quantity}.")
    with transaction.atomic():  # the caller's, when there is one (the admin's add)
        product.save()
        for zone in shipping_zones or []:
            zone.product = product
        ShippingZone.objects.bulk_create(shipping_zones or [])
        drop.product = product
        drop.save()
        rows = Variant.objects.bulk_create(
            Variant(drop=drop, name=v.name, position=n, quantity=v.quantity, price_minor=v.price_minor)
            for n, v in enumerate(sorts)
        )
        inventory.configure_stock(drop=drop, variants=rows, unit_labels=unit_labels)
    return drop


def change_drop(
    *,
    drop: Drop,
    fields: Collection[str] = (),
    inventory_mode: str | None = None,
    bucket_count: int | None = None,
    quantity: int | None = None,
    variants: list[NewVariant] | None = None,
    quantities: Mapping[int, int] | None = None,
    prices: Mapping[int, int | None] | None = None,
) -> None:
    """Save the drop's changed `fields` (never its stock's columns: they move with the stock) and
    change its stock as asked, in one transaction: the caller's when there is one (the admin's
    save), so a refusal (FloodgateError) leaves the drop, its variants and its stock as they were.

    The layout (mode, buckets) changes only before the start with nothing claimed, a quantity
    never below what is held and sold (inventory); `variants` is a new set (change_variants),
    `quantities` and `prices` change the variants kept, by id."""
    with transaction.atomic():
        if fields:
            drop.save(update_fields=list(fields))
        for variant_id, price_minor in (prices or {}).items():
            Variant.objects.filter(pk=variant_id, drop_id=drop.pk).update(price_minor=price_minor)
        stored = Drop.objects.get(pk=drop.pk)  # the stock's columns as they are, not as typed
        mode = inventory_mode or stored.inventory_mode
        buckets = bucket_count or stored.bucket_count
        if (mode, buckets) != (stored.inventory_mode, stored.bucket_count):
            inventory.relayout_stock(drop=stored, inventory_mode=mode, bucket_count=buckets)
        if quantity is not None and quantity != stored.quantity:
            inventory.change_quantity(drop=stored, quantity=quantity)
        if variants is not None:
            change_variants(drop=stored, variants=variants)
        for variant_id, wanted in (quantities or {}).items():
            variant = Variant.objects.get(pk=variant_id, drop_id=drop.pk)
            inventory.change_quantity(drop=stored, quantity=wanted, variant=variant)
    drop.quantity, drop.inventory_mode, drop.bucket_count = (
        stored.quantity,
        stored.inventory_mode,
        stored.bucket_count,
    )


@dataclass(frozen=True)
class NewBuyer:
    username: str
    password: str
    token: str


BUYER_EMAIL_DOMAIN = "buyers.floodgate.invalid"  # RFC 2606: never delivered anywhere


def create_buyers(*, count: int, prefix: str = "buyer", rehearsal: Drop | None = None) -> list[NewBuyer]:
    """Create `count` buyers with one shared password and a bearer token each, in bulk.

    Each gets a verified address at BUYER_EMAIL_DOMAIN, so they can log in to the shop as well
    (the shop asks for a verified e-mail address) without any mail being sent. With `rehearsal`
    (a rehearsal's copy), they take part in that copy and nothing else."""
    if count < 1:
        raise InvalidInput("count must be at least 1.")
    User = get_user_model()
    password = secrets.token_urlsafe(12)
    hashed = make_password(password)  # one hash for all: 10,000 buyers in seconds
    run = secrets.token_hex(3)
    names = [f"{prefix}-{run}-{n}" for n in range(count)]
    tokens = [secrets.token_urlsafe(32) for _ in names]
    with transaction.atomic(durable=True):
        users = User.objects.bulk_create(
            [User(username=name, email=f"{name}@{BUYER_EMAIL_DOMAIN}", password=hashed) for name in names],
            batch_size=2000,
        )
        EmailAddress.objects.bulk_create(
            [EmailAddress(user=user, email=user.email, verified=True, primary=True) for user in users],
            batch_size=2000,
        )
        ApiToken.objects.bulk_create(
            [
                ApiToken(user=user, digest=ApiToken.digest_of(tok))
                for user, tok in zip(users, tokens, strict=True)
            ],
            batch_size=2000,
        )
        if rehearsal is not None:
            RehearsalBuyer.objects.bulk_create(
                [RehearsalBuyer(user=user, drop=rehearsal) for user in users], batch_size=2000
            )
    return [NewBuyer(name, password, tok) for name, tok in zip(names, tokens, strict=True)]


def issue_api_token(*, user_id: int) -> str:
    """A new bearer token for the buyer, replacing the one they had; only its digest is kept.

    The raw token is returned once and never stored. The old token stops working at the commit,
    in every web process (accounts.services.on_token_deleted tells their caches).
    """
    raw = secrets.token_urlsafe(32)
    with transaction.atomic(durable=True):
        ApiToken.objects.filter(user_id=user_id).delete()
        ApiToken.objects.create(user_id=user_id, digest=ApiToken.digest_of(raw))
    log.info("api token issued for user %s", user_id)
    return raw


def revoke_api_token(*, user_id: int) -> bool:
    """Delete the buyer's bearer token; False when they had none."""
    deleted, _ = ApiToken.objects.filter(user_id=user_id).delete()
    if deleted:
        log.info("api token revoked for user %s", user_id)
    return bool(deleted)


def duplicate_drop(
    *,
    drop: Drop,
    starts_in: timedelta = timedelta(days=7),
    slug_word: str = "next",
    rehearsal: bool = False,
    lasts: timedelta | None = None,
) -> Drop:
    """A copy of a drop for the next sale (or, hidden, a rehearsal): same product and rules (a presale
    window as long, without its codes or list), fresh stock, a new slug `<slug>-<slug_word>-<n>`,
    on sale as long as the drop (or `lasts`). A rehearsal copy asks no proof of work: it measures
    the line, not what bots pay to join it."""
    starts_at = timezone.now() + starts_in
    lasts = drop.ends_at - drop.starts_at if lasts is None else lasts
    sorts = list(drop.variants.all())
    named = [NewVariant(v.name, v.quantity, v.price_minor) for v in sorts if v.name]
    # One variant's labels carry over; several are numbered per variant again.
    labels = (stock.unit_labels(drop_id=drop.pk) or None) if len(sorts) == 1 else None
    base = drop.slug[:60]
    stem = f"{base}-{slug_word}"
    taken = set(Drop.objects.filter(slug__startswith=stem).values_list("slug", flat=True))
    slug = next(f"{stem}-{n}" for n in range(1, 10_000) if f"{stem}-{n}" not in taken)
    return create_drop(
        slug=slug,
        quantity=drop.quantity,
        starts_at=starts_at,
        ends_at=starts_at + lasts,
        product_sku=drop.product.sku,
        product_name=drop.product.name,
        price_minor=drop.product.price_minor,
        currency=drop.product.currency,
        tax_rate=drop.product.tax_rate,
        ships=drop.product.ships,
        title=drop.title,
        inventory_mode=drop.inventory_mode,
        bucket_count=drop.bucket_count,
        hold_seconds=drop.hold_seconds,
        offer_seconds=drop.offer_seconds,
        per_buyer_limit=drop.per_buyer_limit,
        waiting_room=drop.waiting_room,
        raffle=drop.raffle,
        admission_wave_seconds=drop.admission_wave_seconds,
        admission_percent=drop.admission_percent,
        join_work_bits=0 if rehearsal else drop.join_work_bits,  # a rehearsal measures the line
        line_close_seconds=drop.line_close_seconds,
        draw_round_wait_seconds=drop.draw_round_wait_seconds,
        redis_gate=drop.redis_gate,
        unit_labels=labels if drop.inventory_mode == InventoryMode.UNITS else None,
        rehearsal_of=drop if rehearsal else None,
        variants=named or None,
        # The next sale's presale is as long as this one's (its codes and list are made anew); a
        # rehearsal measures the public crowd, so its copy has none.
        presale_starts_at=None
        if rehearsal or drop.presale_starts_at is None
        else starts_at - (drop.starts_at - drop.presale_starts_at),
    )
