"""A hold: units set aside for one buyer for a few minutes, then sold, released or expired."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from shop.pricing import Off

MAX_HOLD_QUANTITY = 100
IDEMPOTENCY_KEY_MAX = 64


# "I need more time" (WCAG 2.2.1) may be pressed this often per hold, each press adding half the hold's
# first window: a unit is kept at most twice what the merchant set, so the line waits at most that long.
MORE_TIME_MAX = 2


class HoldState(models.TextChoices):
    HELD = "held", _("Held")
    SOLD = "sold", _("Sold")
    RELEASED = "released", _("Released")
    EXPIRED = "expired", _("Expired")


class Hold(models.Model):
    drop = models.ForeignKey(
        "shop.Drop", on_delete=models.PROTECT, related_name="holds", verbose_name=_("drop")
    )
    buyer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="holds", verbose_name=_("buyer")
    )
    # What the buyer holds: set by the statement that claims the stock (an offer's hold gets the
    # variant of the unit that came back). NULL only inside that transaction.
    variant = models.ForeignKey(
        "shop.Variant",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
        verbose_name=_("variant"),
    )
    quantity = models.PositiveIntegerField(verbose_name=_("quantity"))
    # Buckets mode: the bucket the units came from and return to; NULL in units mode.
    bucket_index = models.PositiveSmallIntegerField(null=True, blank=True, verbose_name=_("bucket index"))
    state = models.CharField(
        max_length=10, choices=HoldState.choices, default=HoldState.HELD, verbose_name=_("state")
    )
    idempotency_key = models.CharField(max_length=IDEMPOTENCY_KEY_MAX, verbose_name=_("idempotency key"))
    # SHA-256 of what the key asked for (quantity, unit): the same key with another request is
    # refused, not answered with this hold. Empty for holds made before it was kept.
    request_digest = models.CharField(
        max_length=64, blank=True, db_default="", verbose_name=_("request digest")
    )
    created_at = models.DateTimeField(verbose_name=_("created at"))
    expires_at = models.DateTimeField(verbose_name=_("expires at"))
    extended = models.BooleanField(default=False, verbose_name=_("extended"))
    ended_at = models.DateTimeField(null=True, blank=True, verbose_name=_("ended at"))
    # Times the buyer pressed "I need more time" (holds.services.more_time), at most MORE_TIME_MAX.
    more_time = models.PositiveSmallIntegerField(default=0, db_default=0, verbose_name=_("more time asked"))
    # Of a sold hold's units: how many were refunded, and of those how many went back on sale
    # (the rest are counted apart, so the invariant of holds/sql.py INVARIANT still holds).
    refunded = models.PositiveIntegerField(default=0, db_default=0, verbose_name=_("refunded"))
    restocked = models.PositiveIntegerField(default=0, db_default=0, verbose_name=_("restocked"))
    # The face-value exchange (sale/exchange.py). On a sold hold: units its buyer has put on the
    # exchange and not yet handed on (they count as the exchange's, not as sold), and of its refunded
    # units those resold to another buyer (they count in that buyer's hold). On an offer of a listed
    # unit, `exchange` is true: it took no stock and gives none back (its bucket index is NULL).
    listed = models.PositiveIntegerField(default=0, db_default=0, verbose_name=_("listed"))
    resold = models.PositiveIntegerField(default=0, db_default=0, verbose_name=_("resold"))
    exchange = models.BooleanField(default=False, db_default=False, verbose_name=_("exchange offer"))
    # An exchange offer's price per unit: its listing's, kept here so the hold and its order read it
    # after the listing has moved on (to the next ticket, or back to its seller).
    exchange_price_minor = models.PositiveIntegerField(
        null=True, blank=True, verbose_name=_("exchange price (minor units)")
    )
    # Where a product that ships goes, given while the hold is held (sale.addresses). No index:
    # every claim inserts a hold, and nothing looks holds up by address (addresses are never deleted).
    shipping_address = models.ForeignKey(
        "shop.Address",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
        verbose_name=_("shipping address"),
    )
    # The presale code this hold's claim spent (holds/presale.py), set by the statement that spends
    # it. No index, as above: every claim inserts a hold; a code with holds cannot be deleted.
    presale_code = models.ForeignKey(
        "holds.PresaleCode",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="holds",
        db_index=False,
        verbose_name=_("presale code"),
    )
    # The discount code this hold spent a use of (holds/discounts.py), set by the statement that
    # spends it; given back by the statement that releases or expires the hold unpaid. No index,
    # as above.
    discount_code = models.ForeignKey(
        "holds.DiscountCode",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="holds",
        db_index=False,
        verbose_name=_("discount code"),
    )

    class Meta:
        verbose_name = _("hold")
        verbose_name_plural = _("holds")
        constraints = [
            models.UniqueConstraint(
                fields=["drop", "buyer", "idempotency_key"], name="holds_hold_idempotency"
            ),
            models.UniqueConstraint(
                fields=["drop", "buyer"],
                condition=Q(state=HoldState.HELD),
                name="holds_hold_one_active_per_buyer",
            ),
            models.CheckConstraint(
                condition=Q(quantity__gte=1, quantity__lte=MAX_HOLD_QUANTITY),
                name="holds_hold_quantity_range",
            ),
            models.CheckConstraint(condition=Q(state__in=HoldState.values), name="holds_hold_state_valid"),
            models.CheckConstraint(
                condition=Q(expires_at__gt=models.F("created_at")), name="holds_hold_expires_after_created"
            ),
            models.CheckConstraint(
                condition=Q(more_time__lte=MORE_TIME_MAX), name="holds_hold_more_time_capped"
            ),
            models.CheckConstraint(
                condition=Q(state=HoldState.HELD, ended_at__isnull=True)
                | (~Q(state=HoldState.HELD) & Q(ended_at__isnull=False)),
                name="holds_hold_ended_matches_state",
            ),
            # A unit is refunded once, and only a refunded unit can go back on sale.
            models.CheckConstraint(
                condition=Q(restocked__lte=models.F("refunded"), refunded__lte=models.F("quantity"))
                & (Q(refunded=0) | Q(state=HoldState.SOLD)),
                name="holds_hold_refunds_within_sold",
            ),
            # An exchange offer, and only one, has the price of the unit it offers.
            models.CheckConstraint(
                condition=Q(exchange=False, exchange_price_minor__isnull=True)
                | Q(exchange=True, exchange_price_minor__isnull=False),
                name="holds_hold_exchange_priced",
            ),
            # A listed unit is neither refunded nor listed twice; a resold unit was refunded, not restocked.
            models.CheckConstraint(
                condition=Q(listed=0) | Q(state=HoldState.SOLD),
                name="holds_hold_listed_only_sold",
            ),
            models.CheckConstraint(
                condition=Q(refunded__lte=models.F("quantity") - models.F("listed"))
                & Q(resold__lte=models.F("refunded") - models.F("restocked")),
                name="holds_hold_exchange_within_sold",
            ),
        ]
        indexes = [
            # The sweeper's and the invariant's scans over live holds only.
            models.Index(
                fields=["drop", "expires_at"],
                condition=Q(state=HoldState.HELD),
                name="holds_hold_active_expiry",
            ),
            models.Index(fields=["drop", "state"], name="holds_hold_drop_state"),
        ]

    def __str__(self) -> str:
        return gettext("hold %(number)s (%(state)s)") % {"number": self.pk, "state": self.get_state_display()}

    def get_absolute_url(self) -> str:
        return reverse("hold", kwargs={"hold_id": self.pk})


PRESALE_CODE_MAX = 32


class PresaleCode(models.Model):
    """A code that admits its holder to a drop's presale, `max_uses` claims in all (1: single-use).
    Spent by the claim that uses it, in the claim's transaction (holds.sql.SPEND_PRESALE_CODE)."""

    drop = models.ForeignKey(
        "shop.Drop", on_delete=models.CASCADE, related_name="presale_codes", verbose_name=_("drop")
    )
    code = models.CharField(max_length=PRESALE_CODE_MAX, verbose_name=_("code"))
    max_uses = models.PositiveIntegerField(
        default=1, help_text=_("Claims this code admits; 1 = single-use."), verbose_name=_("max uses")
    )
    uses = models.PositiveIntegerField(default=0, editable=False, verbose_name=_("uses"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        verbose_name = _("presale code")
        verbose_name_plural = _("presale codes")
        ordering = ["drop", "id"]
        constraints = [
            models.UniqueConstraint(fields=["drop", "code"], name="holds_presalecode_drop_code"),
            models.CheckConstraint(
                condition=Q(max_uses__gte=1),
                name="holds_presalecode_max_uses_positive",
                violation_error_message=_("A code admits at least one claim."),
            ),
            models.CheckConstraint(
                condition=Q(uses__lte=models.F("max_uses")), name="holds_presalecode_uses_within_max"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.code} ({self.uses}/{self.max_uses})"


class PresaleListEntry(models.Model):
    """An e-mail address on a drop's presale list: an account with it verified may claim in the
    presale window without a code. Kept lower-case (holds.presale.add_to_list)."""

    drop = models.ForeignKey(
        "shop.Drop", on_delete=models.CASCADE, related_name="presale_list", verbose_name=_("drop")
    )
    email = models.EmailField(verbose_name=_("email"))

    class Meta:
        verbose_name = _("presale list entry")
        verbose_name_plural = _("presale list entries")
        ordering = ["drop", "email"]
        constraints = [
            models.UniqueConstraint(fields=["drop", "email"], name="holds_presalelistentry_drop_email"),
            models.CheckConstraint(condition=Q(email=Lower("email")), name="holds_presalelistentry_lower"),
        ]

    def __str__(self) -> str:
        return self.email


DISCOUNT_CODE_MAX = 32


class DiscountCode(models.Model):
    """A code that lowers a hold's price: `percent` off, or `amount_minor` off the line (in
    `currency`), for one drop or (drop empty) every drop, `max_uses` holds in all, between
    `starts_at` and `ends_at` when set. A use is spent by one conditional UPDATE in the hold's
    transaction (holds.sql.SPEND_DISCOUNT_CODE) and given back when that hold ends unpaid."""

    code = models.CharField(max_length=DISCOUNT_CODE_MAX, unique=True, verbose_name=_("code"))
    drop = models.ForeignKey(
        "shop.Drop",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="discount_codes",
        help_text=_("Empty: every drop of the shop."),
        verbose_name=_("drop"),
    )
    percent = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text=_("Percent off, 1-99."), verbose_name=_("percent off")
    )
    amount_minor = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text=_("Or an amount off the line, in minor units (cents): 500 = 5.00."),
        verbose_name=_("amount off (minor units)"),
    )
    currency = models.CharField(
        max_length=3, blank=True, default="", help_text=_("Of the amount off."), verbose_name=_("currency")
    )
    max_uses = models.PositiveIntegerField(
        default=1, help_text=_("Holds this code discounts; 1 = single-use."), verbose_name=_("max uses")
    )
    uses = models.PositiveIntegerField(default=0, editable=False, verbose_name=_("uses"))
    starts_at = models.DateTimeField(null=True, blank=True, verbose_name=_("valid from"))
    ends_at = models.DateTimeField(null=True, blank=True, verbose_name=_("valid until"))
    created_at = models.DateTimeField(auto_now_add=True, verbose_name=_("created at"))

    class Meta:
        verbose_name = _("discount code")
        verbose_name_plural = _("discount codes")
        ordering = ["-id"]
        constraints = [
            # A percentage, or an amount with its currency; never both.
            models.CheckConstraint(
                condition=Q(percent__gte=1, percent__lte=99, amount_minor__isnull=True, currency="")
                | Q(percent__isnull=True, amount_minor__gte=1, currency__regex=r"^[A-Z]{3}$"),
                name="holds_discountcode_percent_or_amount",
                violation_error_message=_("A code takes a percentage or an amount off, not both."),
            ),
            models.CheckConstraint(
                condition=Q(max_uses__gte=1),
                name="holds_discountcode_max_uses_positive",
                violation_error_message=_("A code is usable at least once."),
            ),
            models.CheckConstraint(
                condition=Q(uses__lte=models.F("max_uses")), name="holds_discountcode_uses_within_max"
            ),
            models.CheckConstraint(
                condition=Q(starts_at__isnull=True)
                | Q(ends_at__isnull=True)
                | Q(starts_at__lt=models.F("ends_at")),
                name="holds_discountcode_window",
                violation_error_message=_("A code's start must be before its end."),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.code} ({self.uses}/{self.max_uses})"

    @property
    def terms(self) -> Off:
        """What the code takes off, as shop.pricing computes it."""
        return Off(percent=self.percent, amount_minor=self.amount_minor)


class ListingState(models.TextChoices):
    LISTED = "listed", _("Listed")  # waiting for the next ticket in line
    OFFERED = "offered", _("Offered")  # held for that ticket's buyer (hold), for the offer time
    SOLD = "sold", _("Sold")  # the new buyer's hold is sold; the seller is refunded on capture
    PAID = "paid", _("Seller refunded")  # the capture came, the seller's refund is written
    WITHDRAWN = "withdrawn", _("Withdrawn")  # the seller took it back before anyone had it
    KEPT = "kept", _("Kept")  # the exchange closed with nobody taking it: the seller keeps it


class Listing(models.Model):
    """One unit of a confirmed order put on a drop's face-value exchange (sale/exchange.py): offered to
    the next ticket in line at `price_minor` (never above what the seller paid), and once that buyer's
    payment is captured the seller is refunded the price less `fee_minor` (checkout.refunds)."""

    drop = models.ForeignKey(
        "shop.Drop", on_delete=models.PROTECT, related_name="listings", verbose_name=_("drop")
    )
    seller_hold = models.ForeignKey(
        Hold, on_delete=models.PROTECT, related_name="listings", verbose_name=_("seller's hold")
    )
    state = models.CharField(
        max_length=10, choices=ListingState.choices, default=ListingState.LISTED, verbose_name=_("state")
    )
    # The offer (a hold of the next ticket's buyer) while offered, and the hold that bought it after.
    hold = models.OneToOneField(
        Hold,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="listing",
        verbose_name=_("buyer's hold"),
    )
    price_minor = models.PositiveIntegerField(verbose_name=_("price (minor units)"))
    fee_minor = models.PositiveIntegerField(default=0, verbose_name=_("fee (minor units)"))
    created_at = models.DateTimeField(verbose_name=_("created at"))
    ended_at = models.DateTimeField(null=True, blank=True, verbose_name=_("ended at"))

    class Meta:
        verbose_name = _("exchange listing")
        verbose_name_plural = _("exchange listings")
        ordering = ["drop", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=ListingState.values), name="holds_listing_state_valid"
            ),
            # The seller is refunded something: the fee takes less than the price.
            models.CheckConstraint(
                condition=Q(fee_minor__lt=models.F("price_minor")), name="holds_listing_fee_below_price"
            ),
            models.CheckConstraint(
                condition=Q(hold__isnull=True, state__in=["listed", "withdrawn", "kept"])
                | Q(hold__isnull=False, state__in=["offered", "sold", "paid"]),
                name="holds_listing_hold_matches_state",
            ),
        ]
        indexes = [
            models.Index(fields=["drop", "id"], condition=Q(state="listed"), name="holds_listing_waiting"),
        ]

    def __str__(self) -> str:
        return gettext("listing %(number)s (%(state)s)") % {
            "number": self.pk,
            "state": self.get_state_display(),
        }
