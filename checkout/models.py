"""Orders, payment attempts, provider webhooks as received, and the outbox."""

from __future__ import annotations

import uuid
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from checkout import failures
from shop.models import money
from shop.pricing import Price, Total


def _refund_key() -> str:
    return f"floodgate-refund-{uuid.uuid4()}"


class OrderState(models.TextChoices):
    PENDING = "pending", _("Pending")
    CONFIRMED = "confirmed", _("Confirmed")
    FAILED = "failed", _("Failed")
    REFUNDED = "refunded", _("Refunded")  # confirmed, then every unit refunded
    CANCELLED = "cancelled", _("Cancelled")  # by the buyer before the money was taken


class Order(models.Model):
    """What a buyer is paying for: made from a hold when payment starts."""

    hold = models.OneToOneField(
        "holds.Hold", on_delete=models.PROTECT, related_name="order", verbose_name=_("hold")
    )
    buyer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="orders", verbose_name=_("buyer")
    )
    drop = models.ForeignKey(
        "shop.Drop", on_delete=models.PROTECT, related_name="orders", verbose_name=_("drop")
    )
    quantity = models.PositiveIntegerField(verbose_name=_("quantity"))
    amount_minor = models.BigIntegerField(
        help_text=_("The gross: what the provider charges."), verbose_name=_("amount minor")
    )
    currency = models.CharField(max_length=3, verbose_name=_("currency"))
    # The tax as it was when payment started (shop.pricing): a rate changed later does not rewrite
    # a receipt. Net is the rest of the gross, computed by PostgreSQL, so the three always add up.
    # Database defaults too: a process still running the code from before (a rolling deploy) inserts
    # orders without these columns, and they are untaxed orders.
    tax_minor = models.BigIntegerField(default=0, db_default=0, verbose_name=_("tax minor"))
    tax_rate = models.DecimalField(
        max_digits=5, decimal_places=2, default=Decimal(0), db_default=Decimal(0), verbose_name=_("tax rate")
    )
    net_minor = models.GeneratedField(
        expression=F("amount_minor") - F("tax_minor"),
        output_field=models.BigIntegerField(),
        db_persist=True,
        verbose_name=_("net minor"),
    )
    # The shipping fee inside amount_minor and its tax inside tax_minor (shop.shipping), as the
    # address's zone said when payment started; 0 for a product not shipped or shipped free.
    shipping_minor = models.BigIntegerField(default=0, db_default=0, verbose_name=_("shipping minor"))
    shipping_tax_minor = models.BigIntegerField(default=0, db_default=0, verbose_name=_("shipping tax minor"))
    shipping_tax_rate = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=Decimal(0),
        db_default=Decimal(0),
        verbose_name=_("shipping tax rate"),
    )
    # The hold's discount code and what it took off the line as shown, kept as they were then.
    discount_code = models.CharField(
        max_length=32, blank=True, default="", db_default="", verbose_name=_("discount code")
    )
    discount_minor = models.BigIntegerField(default=0, db_default=0, verbose_name=_("discount minor"))
    # The hold's address when payment started; address rows are never edited, so this is a snapshot.
    shipping_address = models.ForeignKey(
        "shop.Address",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("shipping address"),
    )
    state = models.CharField(
        max_length=10, choices=OrderState.choices, default=OrderState.PENDING, verbose_name=_("state")
    )
    failure_reason = models.CharField(max_length=300, blank=True, verbose_name=_("failure reason"))
    refunded = models.BooleanField(
        default=False,
        verbose_name=_("payment voided"),
        help_text=_(
            "Yes when an authorised payment was cancelled, not taken (it came after the hold had "
            "ended, or did not match the price): the buyer is not charged."
        ),
    )
    # Units and money of refunds asked for and not failed: the bound every new refund is checked against.
    refunded_quantity = models.PositiveIntegerField(
        default=0, db_default=0, verbose_name=_("refunded quantity")
    )
    refunded_minor = models.BigIntegerField(default=0, db_default=0, verbose_name=_("refunded minor"))
    # Fulfilment (checkout.fulfilment): set together when the merchant hands the parcel to a carrier.
    shipped_at = models.DateTimeField(null=True, blank=True, verbose_name=_("shipped at"))
    carrier = models.CharField(max_length=20, blank=True, default="", verbose_name=_("carrier"))
    tracking_number = models.CharField(
        max_length=40, blank=True, default="", verbose_name=_("tracking number")
    )
    created_at = models.DateTimeField(db_default=Now(), verbose_name=_("created at"))
    updated_at = models.DateTimeField(db_default=Now(), verbose_name=_("updated at"))

    class Meta:
        verbose_name = _("order")
        verbose_name_plural = _("orders")
        ordering = ["-created_at"]
        permissions = [
            ("refund_order", "Can refund orders and put their units back on sale"),
            ("ship_order", "Can mark orders shipped with a carrier and tracking number"),
        ]
        constraints = [
            # Never more refunded than was paid for, whatever two refunds did at once.
            models.CheckConstraint(
                condition=Q(refunded_quantity__lte=models.F("quantity"), refunded_minor__gte=0)
                & Q(refunded_minor__lte=models.F("amount_minor")),
                name="checkout_order_refunds_within_paid",
            ),
            models.CheckConstraint(
                condition=Q(state__in=OrderState.values), name="checkout_order_state_valid"
            ),
            models.CheckConstraint(
                condition=~Q(state=OrderState.FAILED) | ~Q(failure_reason=""),
                name="checkout_order_failure_has_reason",
            ),
            models.CheckConstraint(
                condition=Q(tax_minor__gte=0) & Q(tax_minor__lte=F("amount_minor")),
                name="checkout_order_tax_within_amount",
            ),
            # The fee is part of what is charged, and its tax part of the order's tax.
            models.CheckConstraint(
                condition=Q(shipping_tax_minor__gte=0, discount_minor__gte=0)
                & Q(shipping_tax_minor__lte=F("shipping_minor"), shipping_minor__lte=F("amount_minor"))
                & Q(shipping_tax_minor__lte=F("tax_minor")),
                name="checkout_order_shipping_within_amount",
            ),
            # A shipment is a carrier and a tracking number with its date, or nothing.
            models.CheckConstraint(
                condition=Q(shipped_at__isnull=True, carrier="", tracking_number="")
                | (Q(shipped_at__isnull=False) & ~Q(carrier="") & ~Q(tracking_number="")),
                name="checkout_order_shipment_whole",
            ),
        ]

    def __str__(self) -> str:
        # in the reader's language: the admin shows it as the order's name
        return gettext("order %(number)s (%(state)s)") % {
            "number": self.pk,
            "state": self.get_state_display(),
        }

    def get_absolute_url(self) -> str:
        return reverse("order", kwargs={"order_id": self.pk})

    @property
    def failure_words(self) -> str:
        """Why it failed, in the reader's language (the row keeps a code: checkout.failures)."""
        return failures.words(self.failure_reason)

    @property
    def amount_display(self) -> str:
        return money(self.amount_minor, self.currency)

    @property
    def price(self) -> Price:
        """The goods' line as snapshotted (without the shipping fee), as shop.pricing computes it."""
        gross = self.amount_minor - self.shipping_minor
        tax = self.tax_minor - self.shipping_tax_minor
        return Price(
            net_minor=gross - tax,
            tax_minor=tax,
            rate=Decimal(self.tax_rate),
            currency=self.currency,
            off_minor=self.discount_minor,
        )

    @property
    def shipping_price(self) -> Price | None:
        """The shipping fee's line as snapshotted; None when none was charged."""
        if not self.shipping_minor:
            return None
        return Price(
            net_minor=self.shipping_minor - self.shipping_tax_minor,
            tax_minor=self.shipping_tax_minor,
            rate=Decimal(self.shipping_tax_rate),
            currency=self.currency,
        )

    @property
    def charge(self) -> Total:
        """Everything charged: the goods and the fee, each with its own tax."""
        return Total(goods=self.price, shipping=self.shipping_price)


class PaymentState(models.TextChoices):
    CREATED = "created", _("Created")  # row written, provider session not opened yet
    PENDING = "pending", _("Pending")  # buyer at the provider; waiting for its webhook
    CAPTURE_PENDING = "capture_pending", _("Capture Pending")  # authorised and the hold sold: capture to do
    CAPTURED = "captured", _("Captured")
    VOID_PENDING = "void_pending", _("Void Pending")  # authorised too late: void to do
    VOIDED = "voided", _("Voided")
    FAILED = "failed", _("Failed")  # declined, or no session could be opened
    CAPTURE_FAILED = (
        "capture_failed",
        _("Capture Failed"),
    )  # the provider refused the capture for good: on-call acts
    VOID_FAILED = "void_failed", _("Void Failed")  # the provider refused the void for good: on-call acts


class Payment(models.Model):
    """One attempt to pay an order at a provider."""

    order = models.ForeignKey(
        Order, on_delete=models.PROTECT, related_name="payments", verbose_name=_("order")
    )
    provider = models.CharField(max_length=30, verbose_name=_("provider"))
    reference = models.UUIDField(default=uuid.uuid4, unique=True, editable=False, verbose_name=_("reference"))
    session_id = models.CharField(max_length=100, null=True, blank=True, verbose_name=_("session id"))
    redirect_url = models.URLField(max_length=500, blank=True, verbose_name=_("redirect url"))
    state = models.CharField(
        max_length=20, choices=PaymentState.choices, default=PaymentState.CREATED, verbose_name=_("state")
    )
    amount_minor = models.BigIntegerField(verbose_name=_("amount minor"))
    currency = models.CharField(max_length=3, verbose_name=_("currency"))
    last_error = models.CharField(max_length=300, blank=True, verbose_name=_("last error"))
    created_at = models.DateTimeField(db_default=Now(), verbose_name=_("created at"))
    updated_at = models.DateTimeField(db_default=Now(), verbose_name=_("updated at"))

    class Meta:
        verbose_name = _("payment")
        verbose_name_plural = _("payments")
        # Recording a refused capture or void as settled by hand silences an alert: its own permission.
        permissions = [("settle_payment", "Can mark a refused capture or void settled by hand")]
        constraints = [
            models.UniqueConstraint(
                fields=["provider", "session_id"], name="checkout_payment_provider_session"
            ),
            models.CheckConstraint(
                condition=Q(state__in=PaymentState.values), name="checkout_payment_state_valid"
            ),
            # At most one attempt in flight per order: a double click cannot open two sessions.
            models.UniqueConstraint(
                fields=["order"],
                condition=Q(state__in=["created", "pending"]),
                name="checkout_payment_one_open_per_order",
            ),
        ]

    def __str__(self) -> str:
        return gettext("payment %(number)s (%(state)s)") % {
            "number": self.pk,
            "state": self.get_state_display(),
        }


class RefundState(models.TextChoices):
    REQUESTED = (
        "requested",
        _("Requested"),
    )  # row written; the provider has not answered yet (retried until it does)
    PENDING = (
        "pending",
        _("Pending"),
    )  # the provider accepted it; the money is on its way back (a webhook confirms)
    SUCCEEDED = "succeeded", _("Succeeded")
    FAILED = "failed", _("Failed")  # refused for good: its units and amount count as unrefunded again


REFUND_KEY_MAX = 64


class Refund(models.Model):
    """Money (and units) given back for a paid order, whole or in part."""

    order = models.ForeignKey(
        Order, on_delete=models.PROTECT, related_name="refunds", verbose_name=_("order")
    )
    payment = models.ForeignKey(
        Payment, on_delete=models.PROTECT, related_name="refunds", verbose_name=_("payment")
    )
    quantity = models.PositiveIntegerField(help_text=_("Units refunded."), verbose_name=_("quantity"))
    amount_minor = models.BigIntegerField(verbose_name=_("amount minor"))
    currency = models.CharField(max_length=3, verbose_name=_("currency"))
    restock = models.BooleanField(help_text=_("The units go back on sale."), verbose_name=_("restock"))
    state = models.CharField(
        max_length=10, choices=RefundState.choices, default=RefundState.REQUESTED, verbose_name=_("state")
    )
    # Sent to the provider as its idempotency key: a retried call is this one refund.
    key = models.CharField(
        max_length=REFUND_KEY_MAX, unique=True, default=_refund_key, editable=False, verbose_name=_("key")
    )
    # The caller's Idempotency-Key, if any: the same request twice is this refund, answered again.
    request_key = models.CharField(max_length=REFUND_KEY_MAX, blank=True, verbose_name=_("request key"))
    provider_refund_id = models.CharField(max_length=100, blank=True, verbose_name=_("provider refund id"))
    reason = models.CharField(max_length=300, blank=True, verbose_name=_("reason"))
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("requested by"),
    )
    last_error = models.CharField(max_length=300, blank=True, verbose_name=_("last error"))
    # A seller's refund for a unit resold through the face-value exchange: one per listing. Its unit
    # was counted over to the new buyer when that payment was captured, not when this succeeds.
    listing = models.OneToOneField(
        "holds.Listing",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="refund",
        verbose_name=_("exchange listing"),
    )
    created_at = models.DateTimeField(db_default=Now(), verbose_name=_("created at"))
    updated_at = models.DateTimeField(db_default=Now(), verbose_name=_("updated at"))

    class Meta:
        verbose_name = _("refund")
        verbose_name_plural = _("refunds")
        ordering = ["created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=RefundState.values), name="checkout_refund_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(quantity__gte=1, amount_minor__gte=1), name="checkout_refund_positive"
            ),
            models.UniqueConstraint(
                fields=["order", "request_key"],
                condition=~Q(request_key=""),
                name="checkout_refund_request_once",
            ),
        ]

    def __str__(self) -> str:
        words = {"number": self.pk, "order": self.order_id, "state": self.get_state_display()}
        return gettext("refund %(number)s of order %(order)s (%(state)s)") % words

    @property
    def amount_display(self) -> str:
        return money(self.amount_minor, self.currency)


class InvoiceKind(models.TextChoices):
    INVOICE = "invoice", _("Invoice")
    CREDIT_NOTE = "credit_note", _("Credit note")


class InvoiceCounter(models.Model):
    """The last number given in one gapless sequence (checkout.invoices takes the next one)."""

    sequence = models.CharField(max_length=30, primary_key=True, verbose_name=_("sequence"))
    last_number = models.PositiveBigIntegerField(default=0, verbose_name=_("last number"))

    class Meta:
        verbose_name = _("invoice counter")
        verbose_name_plural = _("invoice counters")

    def __str__(self) -> str:
        return f"{self.sequence}: {self.last_number}"


class Invoice(models.Model):
    """An invoice for a confirmed order, or a credit note for one refund: numbered once, in the
    transaction that confirmed the order (or recorded the refund), and never changed after. What it
    says is kept here as it was then (seller, buyer, line, amounts), so a later change of the shop's
    identity, an address or a tax rate does not rewrite it; the PDF is drawn from these columns."""

    order = models.ForeignKey(
        Order, on_delete=models.PROTECT, related_name="invoices", verbose_name=_("order")
    )
    refund = models.OneToOneField(
        Refund,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="credit_note",
        verbose_name=_("refund"),
    )
    kind = models.CharField(max_length=20, choices=InvoiceKind.choices, verbose_name=_("kind"))
    number = models.PositiveBigIntegerField(verbose_name=_("number"))
    issued_at = models.DateTimeField(db_default=Now(), verbose_name=_("issued at"))
    description = models.CharField(max_length=300, verbose_name=_("description"))
    quantity = models.IntegerField(verbose_name=_("quantity"))  # negative on a credit note
    net_minor = models.BigIntegerField(verbose_name=_("net minor"))
    tax_minor = models.BigIntegerField(verbose_name=_("tax minor"))
    gross_minor = models.BigIntegerField(verbose_name=_("gross minor"))
    tax_rate = models.DecimalField(max_digits=5, decimal_places=2, verbose_name=_("tax rate"))
    currency = models.CharField(max_length=3, verbose_name=_("currency"))
    seller = models.JSONField(verbose_name=_("seller"))  # name, legal_name, address, vat_id, contact_email
    buyer = models.JSONField(verbose_name=_("buyer"))  # name, address (lines), email
    payment_method = models.CharField(max_length=30, verbose_name=_("payment method"))  # the provider
    # An invoice's amounts above are its totals; the shipping fee inside them is its own line here
    # (0 where none was charged or given back), with the discount the line was sold at.
    shipping_gross_minor = models.BigIntegerField(
        default=0, db_default=0, verbose_name=_("shipping gross minor")
    )
    shipping_tax_minor = models.BigIntegerField(default=0, db_default=0, verbose_name=_("shipping tax minor"))
    shipping_tax_rate = models.DecimalField(
        max_digits=5,
        decimal_places=2,
        default=Decimal(0),
        db_default=Decimal(0),
        verbose_name=_("shipping tax rate"),
    )
    discount_code = models.CharField(
        max_length=32, blank=True, default="", db_default="", verbose_name=_("discount code")
    )
    discount_minor = models.BigIntegerField(default=0, db_default=0, verbose_name=_("discount minor"))

    class Meta:
        verbose_name = _("invoice")
        verbose_name_plural = _("invoices")
        ordering = ["kind", "number"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "number"], name="checkout_invoice_number_once"),
            models.UniqueConstraint(
                fields=["order"], condition=Q(kind="invoice"), name="checkout_invoice_one_per_order"
            ),
            models.CheckConstraint(
                condition=Q(kind="invoice", refund__isnull=True)
                | Q(kind="credit_note", refund__isnull=False),
                name="checkout_invoice_credit_note_has_refund",
            ),
            models.CheckConstraint(
                condition=Q(gross_minor=F("net_minor") + F("tax_minor")), name="checkout_invoice_adds_up"
            ),
            # An invoice charges, a credit note gives back: its amounts are negative.
            models.CheckConstraint(
                condition=Q(kind="invoice", gross_minor__gte=0, tax_minor__gte=0)
                | Q(kind="credit_note", gross_minor__lte=0, tax_minor__lte=0),
                name="checkout_invoice_sign_of_kind",
            ),
            # The fee's line is inside the totals, with the totals' sign (a credit note's negative).
            models.CheckConstraint(
                condition=Q(
                    kind="invoice",
                    shipping_tax_minor__gte=0,
                    shipping_tax_minor__lte=F("shipping_gross_minor"),
                    shipping_gross_minor__lte=F("gross_minor"),
                )
                | Q(
                    kind="credit_note",
                    shipping_tax_minor__lte=0,
                    shipping_tax_minor__gte=F("shipping_gross_minor"),
                    shipping_gross_minor__gte=F("gross_minor"),
                ),
                name="checkout_invoice_shipping_within_gross",
            ),
        ]

    def __str__(self) -> str:
        return self.number_text

    @property
    def shipping_net_minor(self) -> int:
        return self.shipping_gross_minor - self.shipping_tax_minor

    @property
    def goods_net_minor(self) -> int:
        return self.net_minor - self.shipping_net_minor

    @property
    def goods_tax_minor(self) -> int:
        return self.tax_minor - self.shipping_tax_minor

    @property
    def goods_gross_minor(self) -> int:
        return self.gross_minor - self.shipping_gross_minor

    @property
    def number_text(self) -> str:
        """The number as printed: a prefix per sequence, so the two never read the same."""
        return f"{'INV' if self.kind == InvoiceKind.INVOICE else 'CRN'}-{self.number:06d}"

    @property
    def file_name(self) -> str:
        return f"{self.number_text}.pdf"


EVENT_ID_MAX = 100


class WebhookEvent(models.Model):
    """A provider callback as received; its event id makes processing happen once."""

    provider = models.CharField(max_length=30, verbose_name=_("provider"))
    event_id = models.CharField(max_length=EVENT_ID_MAX, verbose_name=_("event id"))
    type = models.CharField(max_length=50, verbose_name=_("type"))
    payload = models.JSONField(verbose_name=_("payload"))
    # The adapter's reading of the payload (base.WebhookEvent's fields): what the saga acts on,
    # whatever shape the provider's own body has. Empty for events stored before it was kept.
    facts = models.JSONField(default=dict, db_default={}, verbose_name=_("facts"))
    received_at = models.DateTimeField(db_default=Now(), verbose_name=_("received at"))
    processed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("processed at"))
    outcome = models.CharField(max_length=100, blank=True, verbose_name=_("outcome"))

    class Meta:
        verbose_name = _("webhook event")
        verbose_name_plural = _("webhook events")
        constraints = [
            models.UniqueConstraint(fields=["provider", "event_id"], name="checkout_webhookevent_once"),
        ]

    def __str__(self) -> str:
        return f"{self.provider}:{self.event_id}"


class OutboxMessage(models.Model):
    """An event that must leave the process, written with the change it announces."""

    topic = models.CharField(max_length=50, verbose_name=_("topic"))
    key = models.CharField(
        max_length=100, help_text=_("The consumer's deduplication key."), verbose_name=_("key")
    )
    payload = models.JSONField(verbose_name=_("payload"))
    created_at = models.DateTimeField(db_default=Now(), verbose_name=_("created at"))
    sent_at = models.DateTimeField(null=True, blank=True, verbose_name=_("sent at"))
    next_attempt_at = models.DateTimeField(
        db_default=Now(), help_text=_("Backs off after each failure."), verbose_name=_("next attempt at")
    )
    attempts = models.PositiveIntegerField(default=0, verbose_name=_("attempts"))
    last_error = models.CharField(max_length=300, blank=True, verbose_name=_("last error"))

    class Meta:
        verbose_name = _("outbox message")
        verbose_name_plural = _("outbox messages")
        constraints = [models.UniqueConstraint(fields=["topic", "key"], name="checkout_outbox_topic_key")]
        indexes = [
            models.Index(fields=["id"], condition=Q(sent_at__isnull=True), name="checkout_outbox_unsent"),
        ]

    def __str__(self) -> str:
        return f"{self.topic} {self.key}"


class Reminder(models.Model):
    """A buyer asked to be told by e-mail when a drop opens; `sent_at` is set in the transaction that
    writes the e-mail's outbox row, so each reminder becomes one message, whoever sends it."""

    drop = models.ForeignKey(
        "shop.Drop", on_delete=models.CASCADE, related_name="reminders", verbose_name=_("drop")
    )
    buyer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reminders", verbose_name=_("buyer")
    )
    created_at = models.DateTimeField(db_default=Now(), verbose_name=_("created at"))
    sent_at = models.DateTimeField(null=True, blank=True, verbose_name=_("sent at"))

    class Meta:
        verbose_name = _("reminder")
        verbose_name_plural = _("reminders")
        constraints = [models.UniqueConstraint(fields=["drop", "buyer"], name="checkout_reminder_once")]
        indexes = [
            models.Index(fields=["drop"], condition=Q(sent_at__isnull=True), name="checkout_reminder_unsent"),
        ]

    def __str__(self) -> str:
        return f"reminder of drop {self.drop_id} for buyer {self.buyer_id}"


class DisputeState(models.TextChoices):
    NEEDS_RESPONSE = "needs_response", _("Needs a response")  # evidence is due
    UNDER_REVIEW = "under_review", _("Under review")  # evidence sent; the bank decides
    WON = "won", _("Won")  # the money stays with the shop
    LOST = "lost", _("Lost")  # the money went back to the buyer


DISPUTE_DECIDED = [DisputeState.WON, DisputeState.LOST]


class Dispute(models.Model):
    """A buyer's bank disputing a payment (a chargeback), as the provider's latest event says.

    Written only by checkout.disputes from webhook events: one row per provider dispute id, and a
    decided one is never changed again (sql.UPDATE_DISPUTE)."""

    order = models.ForeignKey(
        Order, on_delete=models.PROTECT, related_name="disputes", verbose_name=_("order")
    )
    payment = models.ForeignKey(
        Payment, on_delete=models.PROTECT, related_name="disputes", verbose_name=_("payment")
    )
    provider = models.CharField(max_length=30, verbose_name=_("provider"))
    dispute_id = models.CharField(max_length=100, verbose_name=_("provider's dispute id"))
    state = models.CharField(max_length=20, choices=DisputeState.choices, verbose_name=_("state"))
    amount_minor = models.BigIntegerField(verbose_name=_("amount minor"))
    currency = models.CharField(max_length=3, verbose_name=_("currency"))
    reason = models.CharField(max_length=100, blank=True, verbose_name=_("reason"))
    evidence_due_at = models.DateTimeField(null=True, blank=True, verbose_name=_("evidence due by"))
    opened_at = models.DateTimeField(db_default=Now(), verbose_name=_("opened at"))
    closed_at = models.DateTimeField(null=True, blank=True, verbose_name=_("closed at"))
    # The provider's time of the last event applied: an older one arriving late changes nothing.
    last_event_at = models.DateTimeField(verbose_name=_("last event at"))
    updated_at = models.DateTimeField(db_default=Now(), verbose_name=_("updated at"))

    class Meta:
        verbose_name = _("dispute")
        verbose_name_plural = _("disputes")
        ordering = ["-opened_at"]
        constraints = [
            models.UniqueConstraint(fields=["provider", "dispute_id"], name="checkout_dispute_once"),
            models.CheckConstraint(
                condition=Q(state__in=DisputeState.values), name="checkout_dispute_state_valid"
            ),
            models.CheckConstraint(condition=Q(amount_minor__gte=0), name="checkout_dispute_amount_valid"),
            # closed_at says when it was decided, and only a decided dispute has one
            models.CheckConstraint(
                condition=Q(state__in=DISPUTE_DECIDED, closed_at__isnull=False)
                | (~Q(state__in=DISPUTE_DECIDED) & Q(closed_at__isnull=True)),
                name="checkout_dispute_closed_when_decided",
            ),
        ]
        indexes = [
            models.Index(
                fields=["state"], condition=~Q(state__in=DISPUTE_DECIDED), name="checkout_dispute_open"
            ),
        ]

    def __str__(self) -> str:
        words = {"order": self.order_id, "state": self.get_state_display()}
        return gettext("dispute of order %(order)s (%(state)s)") % words

    @property
    def amount_display(self) -> str:
        return money(self.amount_minor, self.currency)


class PaymentCustomer(models.Model):
    """The buyer's customer at a provider (Stripe's `cus_...`), made when they first save a card."""

    buyer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="payment_customers",
        verbose_name=_("buyer"),
    )
    provider = models.CharField(max_length=40, verbose_name=_("provider"))
    customer_id = models.CharField(max_length=255, verbose_name=_("customer id"))
    created_at = models.DateTimeField(db_default=Now(), verbose_name=_("created at"))

    class Meta:
        verbose_name = _("payment customer")
        verbose_name_plural = _("payment customers")
        constraints = [
            # One customer per buyer and provider: two tabs saving a card share it.
            models.UniqueConstraint(fields=["buyer", "provider"], name="checkout_payment_customer_once"),
        ]

    def __str__(self) -> str:
        return f"{self.provider} customer of buyer {self.buyer_id}"


class SavedCard(models.Model):
    """A card the buyer saved at the provider (a Stripe SetupIntent) to pay a hold in one press.
    Only the provider's id of it and what the buyer recognises it by are kept, never its number."""

    buyer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="saved_cards",
        verbose_name=_("buyer"),
    )
    provider = models.CharField(max_length=40, verbose_name=_("provider"))
    payment_method_id = models.CharField(max_length=255, verbose_name=_("payment method id"))
    brand = models.CharField(max_length=40, blank=True, verbose_name=_("brand"))
    last4 = models.CharField(max_length=4, verbose_name=_("last four digits"))
    exp_month = models.PositiveSmallIntegerField(verbose_name=_("expiry month"))
    exp_year = models.PositiveSmallIntegerField(verbose_name=_("expiry year"))
    created_at = models.DateTimeField(db_default=Now(), verbose_name=_("created at"))

    class Meta:
        verbose_name = _("saved card")
        verbose_name_plural = _("saved cards")
        ordering = ["-created_at", "-pk"]
        constraints = [
            # A setup reported twice (a reload, two tabs) saves the card once.
            models.UniqueConstraint(
                fields=["provider", "payment_method_id"], name="checkout_saved_card_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.brand} •••• {self.last4}"


class PushSubscription(models.Model):
    """A browser's Web Push subscription (RFC 8030), opted into from the waiting page: where the
    buyer's push service takes messages for that browser, and the keys they are encrypted to
    (RFC 8291). One row per endpoint: a browser signed in as another buyer moves to them."""

    buyer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="push_subscriptions",
        verbose_name=_("buyer"),
    )
    endpoint = models.URLField(max_length=1000, verbose_name=_("endpoint"))
    p256dh = models.CharField(max_length=100, verbose_name=_("public key"))
    auth = models.CharField(max_length=40, verbose_name=_("authentication secret"))
    created_at = models.DateTimeField(db_default=Now(), verbose_name=_("created at"))

    class Meta:
        verbose_name = _("push subscription")
        verbose_name_plural = _("push subscriptions")
        constraints = [models.UniqueConstraint(fields=["endpoint"], name="checkout_pushsubscription_once")]
        indexes = [models.Index(fields=["buyer"], name="checkout_push_buyer")]

    def __str__(self) -> str:
        return f"push subscription {self.pk} of buyer {self.buyer_id}"
