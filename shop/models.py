"""The catalogue: products, the drops that put them on sale, and API tokens for buyers."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection
from datetime import datetime
from decimal import Decimal
from typing import ClassVar

from babel import Locale
from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now
from django.urls import reverse
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from core import formatting

SLUG_RULE = RegexValidator(
    r"^[a-z0-9]+(?:-[a-z0-9]+)*$",
    _("Use lower-case letters, digits and single hyphens, e.g. 'spring-sneaker-drop'."),
)
MAX_BUCKETS = 256
HOLD_SECONDS_RANGE = (30, 3600)
OFFER_SECONDS_RANGE = (15, 900)
PER_BUYER_LIMIT_MAX = 100
ADMISSION_PERCENT_RANGE = (100, 1000)
# The waiting room's entry list closes this long before the start (admission/drawing.py): with
# quicknet's 3 s rounds the round it names is then due at least 6 s before the start, time to read
# it (retrying a relay that fails) and draw, so the first wave goes in at the start itself.
DEFAULT_LINE_CLOSE_SECONDS = 10
LINE_CLOSE_SECONDS_MAX = 600
DRAW_ROUND_WAIT_MAX = 600
# An EU VAT ID as VIES knows it: a member state's prefix (EL for Greece, XI for Northern Ireland),
# then 2 to 12 letters or digits with at least one digit. Spaces, dots and hyphens are dropped first.
VAT_PREFIXES = "AT BE BG CY CZ DE DK EE EL ES FI FR HR HU IE IT LT LU LV MT NL PL PT RO SE SI SK XI"
VAT_ID_RULE = RegexValidator(
    rf"^(?:{VAT_PREFIXES.replace(' ', '|')})(?=[0-9A-Z]*[0-9])[0-9A-Z]{{2,12}}$",
    _("This is not a VAT ID: two letters of an EU country (e.g. DE), then 2 to 12 letters or digits."),
)
COLOUR_RULE = RegexValidator(r"^#[0-9a-f]{6}$", _("Give the colour as # and six hex digits, e.g. #1f5fbf."))
# A join's proof of work, on by default: ~1 s in the page's Web Worker in Chromium on this
# project's machine (bench/README.md, `bench work`); load tests and rehearsal copies set 0.
DEFAULT_JOIN_WORK_BITS = 20


def money(amount_minor: int, currency: str) -> str:
    """12900, "EUR" -> "€129.00": the admin's and the e-mails' format (pages use the buyer's locale)."""
    return formatting.money(amount_minor, currency)


# Letters, digits, dot, dash and underscore, a letter or digit first: a SKU names a file (the
# drawing shipped for it) and a CSV cell, so no slash, no leading dot, nothing a path could climb.
SKU_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
SKU_MESSAGE = _(
    "A SKU may use letters, digits, '.', '-' and '_', and starts with a letter or digit (e.g. TEE-BLK-42)."
)


# A percentage from 0 up to, not including, 100: at 100 a price that includes tax would be all tax.
TAX_RATE_MESSAGE = _("A tax rate is a percentage from 0 up to (not including) 100, e.g. 19 or 7.7.")
TAX_RATE_MAX = Decimal("99.99")  # the largest below 100 with two decimal places
# The column holds up to 999.99, so 100 or 250 reach the validator's words (not "too many digits")
# and the CHECK, rather than overflowing.


class Product(models.Model):
    sku = models.CharField(
        _("SKU"),
        max_length=64,
        unique=True,
        validators=[RegexValidator(SKU_PATTERN, SKU_MESSAGE)],
        help_text=_("Letters, digits, '.', '-' and '_' (e.g. TEE-BLK-42)."),
    )
    name = models.CharField(max_length=200, verbose_name=_("name"))
    description = models.TextField(blank=True, verbose_name=_("description"))
    price_minor = models.PositiveIntegerField(
        _("price (minor units)"), help_text=_("In cents (or the currency's smallest unit): 12900 = 129.00.")
    )
    currency = models.CharField(
        max_length=3, default="EUR", help_text=_("ISO 4217 code, e.g. EUR."), verbose_name=_("currency")
    )
    image = models.ImageField(
        upload_to="products/",
        blank=True,
        help_text=_("A picture of the product (JPEG, PNG or WebP, up to 5 MB), shown on its drop page."),
        verbose_name=_("image"),
    )
    image_url = models.URLField(
        blank=True, help_text=_("Or the address of a picture hosted elsewhere."), verbose_name=_("image url")
    )
    ships = models.BooleanField(
        default=False,
        db_default=False,
        help_text=_(
            "A parcel is sent: the buyer gives a shipping address before paying. "
            "Off for tickets and digital products."
        ),
        verbose_name=_("ships"),
    )
    tax_rate = models.DecimalField(
        _("tax rate (%)"),
        max_digits=5,
        decimal_places=2,
        default=Decimal(0),
        db_default=Decimal(0),  # code that predates the column (a rolling deploy) still inserts
        validators=[
            MinValueValidator(Decimal(0), TAX_RATE_MESSAGE),
            MaxValueValidator(TAX_RATE_MAX, TAX_RATE_MESSAGE),
        ],
        help_text=_(
            "Percent, e.g. 19.00; 0 for none. Whether prices include it is the shop's setting "
            "(Shop: prices include tax)."
        ),
    )

    class Meta:
        verbose_name = _("product")
        verbose_name_plural = _("products")
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(tax_rate__gte=0) & Q(tax_rate__lt=100),
                name="shop_product_tax_rate_range",
                violation_error_message=TAX_RATE_MESSAGE,
            ),
            models.CheckConstraint(
                condition=Q(sku__regex=SKU_PATTERN),
                name="shop_product_sku_safe",
                violation_error_message=SKU_MESSAGE,
            ),
            models.CheckConstraint(
                condition=Q(currency__regex=r"^[A-Z]{3}$"),
                name="shop_product_currency_iso",
                violation_error_message=_("Currency must be a three-letter ISO code such as EUR."),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.sku})"

    @property
    def price_display(self) -> str:
        return money(self.price_minor, self.currency)


class DropState(models.TextChoices):
    SCHEDULED = "scheduled", _("Scheduled")
    LIVE = "live", _("Live")
    PAUSED = "paused", _("Paused")
    ENDED = "ended", _("Ended")


EXCHANGE_RULE = _(
    "An exchange needs the waiting room, counted units (not labelled ones) and a close after the drop's end."
)


class InventoryMode(models.TextChoices):
    """How a drop's stock is kept (inventory/): counters of identical units, or a row per unit."""

    BUCKETS = "buckets", _("Buckets (identical units)")
    UNITS = "units", _("Units (labelled, e.g. seats)")


class DropFormat(models.TextChoices):
    """How a drop's buyers get their units (the admin's choice; the two flags below say it)."""

    FIRST_COME = "first_come", _("First come, first served")
    WAITING_ROOM = "waiting_room", _("Waiting room")
    RAFFLE = "raffle", _("Raffle")


class Drop(models.Model):
    product = models.ForeignKey(
        Product, on_delete=models.PROTECT, related_name="drops", verbose_name=_("product")
    )
    slug = models.SlugField(max_length=80, unique=True, validators=[SLUG_RULE], verbose_name=_("slug"))
    title = models.CharField(
        max_length=200, blank=True, help_text=_("Defaults to the product name."), verbose_name=_("title")
    )
    quantity = models.PositiveIntegerField(
        help_text=_("Units on sale in this drop."), verbose_name=_("quantity")
    )
    starts_at = models.DateTimeField(verbose_name=_("starts at"))
    ends_at = models.DateTimeField(verbose_name=_("ends at"))
    # The presale window: from here until starts_at only a presale code or a place on the drop's
    # list lets a buyer claim (holds/presale.py); empty: no presale.
    presale_starts_at = models.DateTimeField(
        _("presale starts at"),
        null=True,
        blank=True,
        help_text=_(
            "Optional. From then until the start, only buyers with a presale code or on the "
            "drop's presale list can reserve. First-come drops only (not with a waiting room)."
        ),
    )
    inventory_mode = models.CharField(
        max_length=10,
        choices=InventoryMode.choices,
        default=InventoryMode.BUCKETS,
        verbose_name=_("inventory mode"),
    )
    bucket_count = models.PositiveSmallIntegerField(
        default=1,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_BUCKETS)],
        help_text=_(
            "Stock rows the quantity is split over; more rows, less lock contention. 1 = a single counter."
        ),
        verbose_name=_("bucket count"),
    )
    hold_seconds = models.PositiveIntegerField(
        default=480,
        validators=[MinValueValidator(HOLD_SECONDS_RANGE[0]), MaxValueValidator(HOLD_SECONDS_RANGE[1])],
        help_text=_("How long a reserved unit is kept for the buyer before it returns to stock."),
        verbose_name=_("hold seconds"),
    )
    offer_seconds = models.PositiveIntegerField(
        default=90,
        validators=[MinValueValidator(OFFER_SECONDS_RANGE[0]), MaxValueValidator(OFFER_SECONDS_RANGE[1])],
        help_text=_(
            "Waiting room: a unit that comes back is held for the next ticket in line this long; "
            "if that buyer does not start paying in time, it goes to the next."
        ),
        verbose_name=_("offer seconds"),
    )
    per_buyer_limit = models.PositiveSmallIntegerField(
        default=2,
        validators=[MinValueValidator(1), MaxValueValidator(PER_BUYER_LIMIT_MAX)],
        help_text=_("Most units one buyer may hold and buy in this drop."),
        verbose_name=_("per buyer limit"),
    )
    waiting_room = models.BooleanField(
        default=False,
        help_text=_("Admit buyers from a queue in waves instead of all at once."),
        verbose_name=_("waiting room"),
    )
    # A raffle is a waiting room whose entries close at the start: the draw ranks every entry and
    # the units go to the first ranked as offers (admission/raffle.py), not in admission waves.
    raffle = models.BooleanField(
        default=False,
        help_text=_(
            "Raffle: entries are taken until the start, then drawn; the first ranked get a unit each "
            "to pay for within the offer time, and an unpaid win passes to the next ranked entry."
        ),
        verbose_name=_("raffle"),
    )
    admission_wave_seconds = models.PositiveSmallIntegerField(
        default=5,
        validators=[MinValueValidator(1)],
        help_text=_("Seconds between admission waves."),
        verbose_name=_("admission wave seconds"),
    )
    admission_percent = models.PositiveSmallIntegerField(
        default=150,
        validators=[
            MinValueValidator(ADMISSION_PERCENT_RANGE[0]),
            MaxValueValidator(ADMISSION_PERCENT_RANGE[1]),
        ],
        help_text=_(
            "Each wave admits this percentage of the units still available (150 = 1.5 buyers per unit)."
        ),
        verbose_name=_("admission percent"),
    )
    # No longer read: the draw names a drand round itself when its queue is created (admission/
    # beacon.py). The column stays so code from before that change still inserts rows.
    draw_beacon = models.CharField(
        max_length=200, blank=True, default="", editable=False, verbose_name=_("draw beacon")
    )
    join_work_bits = models.PositiveSmallIntegerField(
        _("join proof-of-work (bits)"),
        default=DEFAULT_JOIN_WORK_BITS,
        validators=[MaxValueValidator(28)],
        help_text=format_lazy(
            _(
                "A cost per place in the waiting room that a person does not notice and a bot farm "
                "does: the page solves a fresh puzzle of this many bits in the background before it joins. "
                "0 = none; {bits} (the default) takes about a second in Chromium on a server "
                "core (bench work); each bit doubles it."
            ),
            bits=DEFAULT_JOIN_WORK_BITS,
        ),
    )
    line_close_seconds = models.PositiveSmallIntegerField(
        default=DEFAULT_LINE_CLOSE_SECONDS,
        validators=[MaxValueValidator(LINE_CLOSE_SECONDS_MAX)],
        help_text=format_lazy(
            _(
                "Waiting room: the line closes this many seconds before the start and is drawn by the "
                "start; whoever joins later queues behind it in arrival order. {seconds} (the default) "
                "leaves time to read the public random round before the start."
            ),
            seconds=DEFAULT_LINE_CLOSE_SECONDS,
        ),
        verbose_name=_("line closes (seconds before the start)"),
    )
    draw_round_wait_seconds = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(DRAW_ROUND_WAIT_MAX)],
        help_text=_(
            "Waiting room: if the public random round cannot be read, the draw (and the first wave) "
            "waits up to this many seconds after the start for it. At the limit it is drawn on the "
            "shop's seed alone and says so to buyers. 0 = no wait beyond the start."
        ),
        verbose_name=_("draw waits for the round (seconds)"),
    )
    # The face-value exchange (sale/exchange.py): after the sale, buyers with a confirmed order may put
    # units back at the price they paid; each goes to the next ticket in the line. Empty: no exchange.
    exchange_closes_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text=_(
            "Waiting room: after the sale, buyers may put units back at the price they paid until this "
            "time; each goes to the next buyer in line, and the seller is refunded once it is paid. "
            "Empty: no exchange."
        ),
        verbose_name=_("exchange closes at"),
    )
    exchange_fee_minor = models.PositiveIntegerField(
        default=0,
        help_text=_(
            "Kept from the seller's refund for each unit resold through the exchange, in minor units "
            "(cents). The public report shows it."
        ),
        verbose_name=_("exchange fee (minor units)"),
    )
    redis_gate = models.BooleanField(
        default=False,
        help_text=_(
            "Turn buyers away in Redis once its count of units reaches zero, before the database. "
            "PostgreSQL still decides every sale."
        ),
        verbose_name=_("redis gate"),
    )
    paused = models.BooleanField(default=False, verbose_name=_("paused"))
    paused_at = models.DateTimeField(null=True, blank=True, verbose_name=_("paused at"))
    paused_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("paused by"),
    )
    pause_reason = models.CharField(max_length=300, blank=True, verbose_name=_("pause reason"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))
    # Set on a rehearsal's copy (ops/rehearsal.py): only the rehearsal's own buyers reach it
    # (shop.sql.AUDIENCE), no catalogue lists it, and its payments never reach a real provider.
    rehearsal_of = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.CASCADE,
        related_name="rehearsals",
        verbose_name=_("rehearsal of"),
    )

    class Meta:
        verbose_name = _("drop")
        verbose_name_plural = _("drops")
        ordering = ["starts_at"]
        permissions = [
            ("pause_drop", "Can pause and resume a drop (kill switch)"),
            ("rehearse_drop", "Can rehearse a drop (a crowd of made-up buyers on a hidden copy)"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(quantity__gt=0),
                name="shop_drop_quantity_positive",
                violation_error_message=_("Quantity must be at least 1."),
            ),
            models.CheckConstraint(
                condition=Q(ends_at__gt=F("starts_at")),
                name="shop_drop_ends_after_start",
                violation_error_message=_("The drop must end after it starts."),
            ),
            models.CheckConstraint(
                condition=Q(presale_starts_at__isnull=True) | Q(presale_starts_at__lt=F("starts_at")),
                name="shop_drop_presale_before_start",
                violation_error_message=_("The presale must start before the drop's public start."),
            ),
            # A waiting room admits by ticket number: a presale beside it would need its own line.
            models.CheckConstraint(
                condition=Q(presale_starts_at__isnull=True) | Q(waiting_room=False),
                name="shop_drop_presale_first_come",
                violation_error_message=_(
                    "A presale is for first-come drops: turn the waiting room off "
                    "or leave the presale start empty."
                ),
            ),
            models.CheckConstraint(
                condition=Q(bucket_count__gte=1, bucket_count__lte=MAX_BUCKETS),
                name="shop_drop_bucket_count_range",
                violation_error_message=_("Use between 1 and 256 buckets."),
            ),
            models.CheckConstraint(
                condition=Q(bucket_count__lte=F("quantity")),
                name="shop_drop_buckets_within_quantity",
                violation_error_message=_("Use at most as many buckets as there are units."),
            ),
            models.CheckConstraint(
                condition=Q(hold_seconds__gte=HOLD_SECONDS_RANGE[0])
                & Q(hold_seconds__lte=HOLD_SECONDS_RANGE[1]),
                name="shop_drop_hold_seconds_range",
                violation_error_message=_("Hold time must be between 30 and 3600 seconds."),
            ),
            models.CheckConstraint(
                condition=Q(offer_seconds__gte=OFFER_SECONDS_RANGE[0])
                & Q(offer_seconds__lte=OFFER_SECONDS_RANGE[1]),
                name="shop_drop_offer_seconds_range",
                violation_error_message=_("An offer's time must be between 15 and 900 seconds."),
            ),
            models.CheckConstraint(
                condition=Q(per_buyer_limit__gte=1, per_buyer_limit__lte=PER_BUYER_LIMIT_MAX),
                name="shop_drop_per_buyer_limit_range",
                violation_error_message=_("The per-buyer limit must be between 1 and 100."),
            ),
            models.CheckConstraint(
                condition=Q(admission_wave_seconds__gte=1),
                name="shop_drop_wave_seconds_positive",
                violation_error_message=_("Admission waves need at least 1 second between them."),
            ),
            models.CheckConstraint(
                condition=Q(admission_percent__gte=ADMISSION_PERCENT_RANGE[0])
                & Q(admission_percent__lte=ADMISSION_PERCENT_RANGE[1]),
                name="shop_drop_admission_percent_range",
                violation_error_message=_("Admit between 100% and 1000% of the remaining units per wave."),
            ),
            models.CheckConstraint(
                condition=Q(line_close_seconds__lte=LINE_CLOSE_SECONDS_MAX),
                name="shop_drop_line_close_seconds_range",
                violation_error_message=_("The line closes at most 600 seconds before the start."),
            ),
            models.CheckConstraint(
                condition=Q(draw_round_wait_seconds__lte=DRAW_ROUND_WAIT_MAX),
                name="shop_drop_draw_round_wait_range",
                violation_error_message=_("The draw waits at most 600 seconds for its round."),
            ),
            models.CheckConstraint(
                condition=Q(raffle=False) | Q(waiting_room=True),
                name="shop_drop_raffle_has_waiting_room",
                violation_error_message=_("A raffle takes its entries through the waiting room; turn it on."),
            ),
            # The exchange offers units through the line, and moves counted units (a named unit's
            # row would have to change hands too: not built).
            models.CheckConstraint(
                condition=Q(exchange_closes_at__isnull=True)
                | (Q(waiting_room=True, exchange_closes_at__gt=F("ends_at")) & ~Q(inventory_mode="units")),
                name="shop_drop_exchange_after_sale",
                violation_error_message=EXCHANGE_RULE,
            ),
            models.CheckConstraint(
                condition=Q(inventory_mode__in=InventoryMode.values),
                name="shop_drop_inventory_mode_valid",
                violation_error_message=_("Inventory mode must be buckets or units."),
            ),
        ]
        indexes = [models.Index(fields=["starts_at", "ends_at"], name="shop_drop_window")]

    def __str__(self) -> str:
        return self.slug

    def get_absolute_url(self) -> str:
        return reverse("drop", kwargs={"slug": self.slug})

    # The rules that span two fields, each said beside the field to change: a form (the admin's)
    # shows it there rather than only at its top.
    CONSTRAINT_FIELDS: ClassVar[dict[str, str]] = {
        "shop_drop_ends_after_start": "ends_at",
        "shop_drop_buckets_within_quantity": "bucket_count",
        "shop_drop_presale_before_start": "presale_starts_at",
        "shop_drop_presale_first_come": "presale_starts_at",
        "shop_drop_exchange_after_sale": "exchange_closes_at",
    }

    def validate_constraints(self, exclude: Collection[str] | None = None) -> None:
        """Django's check of Meta.constraints, a two-field rule's error moved to its field (unless
        the caller excluded that field, as a form does with those it does not show)."""
        try:
            super().validate_constraints(exclude=exclude)
        except ValidationError as error:
            beside = {
                str(c.violation_error_message): self.CONSTRAINT_FIELDS[c.name]
                for c in self._meta.constraints
                if c.name in self.CONSTRAINT_FIELDS
            }
            placed: dict[str, list[ValidationError]] = {}
            for field, found in error.error_dict.items():
                for one in found:
                    to = beside.get(one.messages[0], field) if field == NON_FIELD_ERRORS else field
                    placed.setdefault(field if exclude and to in exclude else to, []).append(one)
            raise ValidationError(placed) from None

    @property
    def display_title(self) -> str:
        return self.title or self.product.name

    def state_at(self, now: datetime) -> DropState:
        """The sale's state at `now`; the claim SQL states the same rule with the DB clock."""
        if self.paused:
            return DropState.PAUSED
        if now < self.starts_at:
            return DropState.SCHEDULED
        if now >= self.ends_at:
            return DropState.ENDED
        return DropState.LIVE

    @property
    def state(self) -> DropState:
        return self.state_at(timezone.now())

    def in_presale_at(self, now: datetime) -> bool:
        """Inside the presale window at `now` (not paused); shop.sql.PRESALE is the same rule."""
        start = self.presale_starts_at
        return not self.paused and start is not None and start <= now < self.starts_at

    @property
    def in_presale(self) -> bool:
        return self.in_presale_at(timezone.now())

    @property
    def format(self) -> DropFormat:
        if self.raffle:
            return DropFormat.RAFFLE
        return DropFormat.WAITING_ROOM if self.waiting_room else DropFormat.FIRST_COME


VARIANT_NAME_MAX = 40
MAX_VARIANTS = 50  # x MAX_BUCKETS bucket indexes still fit a smallint


class Variant(models.Model):
    """One of a drop's variants (a size, a colour, a tier) with its own stock. Every drop has at
    least one; a drop made without any has one named "" (the product itself), and buyers pick
    only where there are several. Its stock rows are inventory's, laid out by position."""

    drop = models.ForeignKey(
        Drop, on_delete=models.CASCADE, related_name="variants", db_index=False, verbose_name=_("drop")
    )
    name = models.CharField(
        max_length=VARIANT_NAME_MAX,
        blank=True,
        help_text=_('As buyers see it: "M", "42", "VIP".'),
        verbose_name=_("name"),
    )
    position = models.PositiveSmallIntegerField(
        help_text=_("Order on the drop page, from 0."), verbose_name=_("position")
    )
    quantity = models.PositiveIntegerField(
        help_text=_("Units of this variant on sale."), verbose_name=_("quantity")
    )
    price_minor = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text=_("Its own price in minor units; empty: the product's price."),
        verbose_name=_("price minor"),
    )

    class Meta:
        verbose_name = _("variant")
        verbose_name_plural = _("variants")
        ordering = ["drop", "position"]
        constraints = [
            models.UniqueConstraint(fields=["drop", "name"], name="shop_variant_drop_name"),
            models.UniqueConstraint(fields=["drop", "position"], name="shop_variant_drop_position"),
            models.CheckConstraint(
                condition=Q(quantity__gt=0),
                name="shop_variant_quantity_positive",
                violation_error_message=_("A variant needs at least 1 unit."),
            ),
            models.CheckConstraint(
                condition=Q(position__lt=MAX_VARIANTS),
                name="shop_variant_position_range",
                violation_error_message=format_lazy(_("A drop has at most {n} variants."), n=MAX_VARIANTS),
            ),
        ]

    def __str__(self) -> str:
        return self.name or gettext("(one variant)")

    def unit_price(self, product: Product) -> int:
        return self.price_minor if self.price_minor is not None else product.price_minor


class ApiToken(models.Model):
    """A bearer token for API buyers; only its SHA-256 is stored."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token", verbose_name=_("user")
    )
    digest = models.CharField(max_length=64, unique=True, verbose_name=_("digest"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        verbose_name = _("API token")  # not Django's "Api token"
        verbose_name_plural = _("API tokens")

    def __str__(self) -> str:
        return gettext("token of user %(user)s") % {"user": self.user_id}

    @staticmethod
    def digest_of(raw: str) -> str:
        return hashlib.sha256(raw.encode()).hexdigest()


class RehearsalBuyer(models.Model):
    """An account made for one rehearsal: it takes part in that rehearsal's copy and nothing else,
    and goes when the rehearsal ends (ops.rehearsal.end)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="rehearsal",
        verbose_name=_("user"),
    )
    drop = models.ForeignKey(
        Drop, on_delete=models.CASCADE, related_name="rehearsal_buyers", verbose_name=_("drop")
    )

    class Meta:
        verbose_name = _("rehearsal buyer")
        verbose_name_plural = _("rehearsal buyers")

    def __str__(self) -> str:
        return f"rehearsal buyer {self.user_id} of drop {self.drop_id}"


class BuyerLanguage(models.Model):
    """The language a buyer last used the shop in (LocaleMiddleware's choice, or the switcher's):
    their e-mails are written in it, also those a task sends with no request around (reminders,
    raffle results). Written only when it changes (accounts.middleware); no row: the sender's."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, primary_key=True, on_delete=models.CASCADE, related_name="language"
    )
    language = models.CharField(max_length=15)  # a code of settings.LANGUAGES (shop.languages)
    changed_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"buyer {self.user_id} reads {self.language}"


class PauseAction(models.TextChoices):
    PAUSED = "paused", _("Paused")
    RESUMED = "resumed", _("Resumed")


class PauseEvent(models.Model):
    """Every use of the kill switch: who (empty for the watchdog), when and why."""

    drop = models.ForeignKey(
        Drop, on_delete=models.CASCADE, related_name="pause_events", verbose_name=_("drop")
    )
    action = models.CharField(max_length=10, choices=PauseAction.choices, verbose_name=_("action"))
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("actor"),
    )
    reason = models.CharField(max_length=300, blank=True, verbose_name=_("reason"))
    at = models.DateTimeField(db_default=Now(), verbose_name=_("at"))

    class Meta:
        verbose_name = _("pause event")
        verbose_name_plural = _("pause events")
        ordering = ["-at"]
        indexes = [models.Index(fields=["drop", "-at"], name="shop_pauseevent_drop_at")]

    def __str__(self) -> str:
        return f"{self.drop_id} {self.action} at {self.at:%H:%M:%S}"


# ISO 3166-1 alpha-2 codes with their English names, from Babel's CLDR data (pinned with the
# package): the territories with a two-letter code, less the groupings that are not a country
# a parcel goes to (EU, EZ, UN, QO) and the unknown region ZZ.
_NOT_COUNTRIES = {"EU", "EZ", "UN", "QO", "ZZ", "XA", "XB"}
COUNTRIES: tuple[tuple[str, str], ...] = tuple(
    sorted(
        (
            (code, name)
            for code, name in Locale("en").territories.items()
            if len(code) == 2 and code.isalpha() and code.isupper() and code not in _NOT_COUNTRIES
        ),
        key=lambda pair: pair[1],
    )
)
ADDRESS_LIMITS = {
    "name": 100,
    "line1": 100,
    "line2": 100,
    "postal_code": 20,
    "city": 60,
    "region": 60,
    "phone": 30,
}


class Address(models.Model):
    """A shipping address as a buyer gave it; never edited, so an order pointing at one keeps what
    was given when it was paid. The account's latest is the one its next hold page suggests."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="addresses", verbose_name=_("user")
    )
    name = models.CharField(max_length=ADDRESS_LIMITS["name"], verbose_name=_("name"))
    line1 = models.CharField(_("address"), max_length=ADDRESS_LIMITS["line1"])
    line2 = models.CharField(_("address (2nd line)"), max_length=ADDRESS_LIMITS["line2"], blank=True)
    postal_code = models.CharField(max_length=ADDRESS_LIMITS["postal_code"], verbose_name=_("postal code"))
    city = models.CharField(max_length=ADDRESS_LIMITS["city"], verbose_name=_("city"))
    region = models.CharField(_("region or state"), max_length=ADDRESS_LIMITS["region"], blank=True)
    # Checked against COUNTRIES by shop.addresses (not choices: Babel's list would become migrations).
    country = models.CharField(
        max_length=2, help_text=_("ISO 3166-1 alpha-2, e.g. DE."), verbose_name=_("country")
    )
    phone = models.CharField(max_length=ADDRESS_LIMITS["phone"], blank=True, verbose_name=_("phone"))
    created_at = models.DateTimeField(db_default=Now(), verbose_name=_("created at"))

    class Meta:
        verbose_name = _("address")
        verbose_name_plural = _("addresses")
        indexes = [models.Index(fields=["user", "-id"], name="shop_address_latest")]
        constraints = [
            models.CheckConstraint(
                condition=Q(country__regex=r"^[A-Z]{2}$"), name="shop_address_country_code"
            )
        ]

    def __str__(self) -> str:
        return ", ".join(self.lines())

    def lines(self) -> list[str]:
        """As a label reads: name, street, [2nd line], postal code and city, [region], country."""
        place = f"{self.postal_code} {self.city}"
        parts = [
            self.name,
            self.line1,
            self.line2,
            place,
            self.region,
            formatting.country(self.country),  # in the reader's language (a page's, an e-mail's)
        ]
        return [part for part in parts if part] + ([f"{gettext('phone')} {self.phone}"] if self.phone else [])


def _known_countries(codes: list[str]) -> None:
    known = {code for code, _name in COUNTRIES}
    unknown = [code for code in codes if code not in known]
    if unknown:
        raise ValidationError(
            _("Not a country code: %(codes)s. Use ISO 3166-1 alpha-2 codes, e.g. DE, AT."),
            params={"codes": ", ".join(unknown)},
        )


class FeeBasis(models.TextChoices):
    ORDER = "order", _("Per order")
    UNIT = "unit", _("Per unit")


class ShippingZone(models.Model):
    """Countries a product ships to, and what sending it there costs: `fee_minor` once per order or
    once per unit, shown as the shop shows prices and taxed at `tax_rate`, else at the product's.
    A product that ships and has no zone ships everywhere without a fee (as before zones existed);
    with zones, only to their countries (shop.shipping)."""

    product = models.ForeignKey(
        Product, on_delete=models.CASCADE, related_name="shipping_zones", verbose_name=_("product")
    )
    name = models.CharField(max_length=60, help_text=_("e.g. Germany, EU, World."), verbose_name=_("name"))
    countries = ArrayField(
        models.CharField(max_length=2),
        validators=[_known_countries],
        help_text=_("ISO 3166-1 alpha-2 codes, separated by commas, e.g. DE,AT,CH."),
        verbose_name=_("countries"),
    )
    fee_minor = models.PositiveIntegerField(
        _("fee (minor units)"), help_text=_("In cents, as prices are shown: 490 = 4.90; 0 for free.")
    )
    fee_basis = models.CharField(
        max_length=5, choices=FeeBasis.choices, default=FeeBasis.ORDER, verbose_name=_("fee charged")
    )
    tax_rate = models.DecimalField(
        _("fee's tax rate (%)"),
        max_digits=5,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[
            MinValueValidator(Decimal(0), TAX_RATE_MESSAGE),
            MaxValueValidator(TAX_RATE_MAX, TAX_RATE_MESSAGE),
        ],
        help_text=_("Empty: taxed like the product."),
    )

    class Meta:
        verbose_name = _("shipping zone")
        verbose_name_plural = _("shipping zones")
        ordering = ["product", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(countries__len__gte=1),
                name="shop_shippingzone_has_countries",
                violation_error_message=_("A zone names at least one country."),
            ),
            models.CheckConstraint(
                condition=Q(tax_rate__isnull=True) | Q(tax_rate__gte=0, tax_rate__lt=100),
                name="shop_shippingzone_tax_rate_range",
                violation_error_message=TAX_RATE_MESSAGE,
            ),
            models.CheckConstraint(
                condition=Q(fee_basis__in=FeeBasis.values), name="shop_shippingzone_fee_basis_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name}: {' '.join(self.countries)}"


class ShopSettings(models.Model):
    """The shop's identity: one row (id 1), read through shop.identity. Until `configured_at` is
    set the shop speaks with SHOP_NAME and the admin and `check --deploy` ask for it."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    name = models.CharField(_("shop name"), max_length=80, help_text=_("What buyers call the shop."))
    legal_name = models.CharField(
        _("legal name"),
        max_length=160,
        help_text=_("The seller's registered name, e.g. 'Harbour Lane GmbH'."),
    )
    address = models.TextField(_("postal address"), max_length=500)
    contact_email = models.EmailField(_("contact e-mail"))
    vat_id = models.CharField(
        _("VAT ID"),
        max_length=14,
        blank=True,
        validators=[VAT_ID_RULE],
        help_text=_("Two letters for the country, then 2 to 12 letters or digits, e.g. DE123456789."),
    )
    logo = models.ImageField(
        _("logo"),
        upload_to="shop/",
        blank=True,
        help_text=_("PNG, JPEG or WebP, up to 1 MB; shown in the header of every page."),
    )
    accent_colour = models.CharField(
        _("accent colour"),
        max_length=7,
        default="#1f5fbf",
        validators=[COLOUR_RULE],
        help_text=_("As #RRGGBB, e.g. #1f5fbf."),
    )
    support_url = models.URLField(_("support URL"), blank=True)
    prices_include_tax = models.BooleanField(
        _("prices include tax"),
        default=True,
        help_text=_(
            "On: a product's price is what the buyer pays (tax inside). Off: tax is added at checkout."
        ),
    )
    configured_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = _("shop")
        verbose_name_plural = _("shop")
        constraints = [models.CheckConstraint(condition=Q(id=1), name="shop_shopsettings_one_row")]

    def __str__(self) -> str:
        return self.name or gettext("Shop")


def normal_vat_id(value: str) -> str:
    """ " de 123.456-789 " -> "DE123456789": the form people write it in, as VIES stores it."""
    return re.sub(r"[\s.\-]", "", value).upper()


def normal_colour(value: str) -> str:
    return value.strip().lower()


class LegalKind(models.TextChoices):
    TERMS = "terms", _("Terms of sale")
    PRIVACY = "privacy", _("Privacy policy")
    NOTICE = "notice", _("Legal notice")
    WITHDRAWAL = "withdrawal", _("Returns and withdrawal")


class LegalText(models.Model):
    """A legal page in one language, the merchant's own words (plain text, rendered escaped)."""

    shop = models.ForeignKey(ShopSettings, on_delete=models.CASCADE, related_name="legal_texts")
    kind = models.CharField(_("page"), max_length=12, choices=LegalKind.choices)
    language = models.CharField(_("language"), max_length=8, choices=settings.LANGUAGES)
    body = models.TextField(
        _("text"),
        max_length=40_000,
        help_text=_("Plain text: a blank line starts a paragraph, a line starting with '## ' a heading."),
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("legal page")
        verbose_name_plural = _("legal pages")
        ordering = ["kind", "language"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "language"], name="shop_legaltext_one_per_language")
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} ({self.language})"
