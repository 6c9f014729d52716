"""Checkout reads for merchants."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db.models import Count, Min, Sum
from django.utils import timezone

from checkout import answers, carriers, failures
from checkout.models import (
    DISPUTE_DECIDED,
    Dispute,
    DisputeState,
    Order,
    OrderState,
    OutboxMessage,
    Payment,
    PaymentState,
    Refund,
    RefundState,
    WebhookEvent,
)
from core import formatting
from holds.models import Listing
from shop.models import Variant

NEEDS_ATTENTION = [PaymentState.CAPTURE_FAILED, PaymentState.VOID_FAILED]
MERCHANTS = "Merchants"  # the group shop/migrations/0003_roles makes


def export_rows(*, drop_ids: list[int]) -> list[list[object]]:
    """One row per order of the drops, for the merchant's CSV export."""
    orders = (
        Order.objects.filter(drop_id__in=list(drop_ids))
        .select_related("drop", "buyer", "shipping_address", "hold__variant")
        .prefetch_related("hold__units")
        .order_by("drop_id", "created_at")
    )
    return [
        [
            order.drop.slug,
            order.pk,
            order.buyer.get_username(),
            order.buyer.email,
            order.quantity,
            " ".join(sorted(u.label for u in order.hold.units.all())),
            formatting.plain_amount(order.amount_minor, order.currency),
            order.currency,
            order.state,
            order.refunded,
            order.created_at.isoformat(),
            order.failure_words,
            order.refunded_quantity,
            formatting.plain_amount(order.refunded_minor, order.currency),
            # Added last, so a sheet reading the columns by position still finds the old ones.
            formatting.plain_amount(order.net_minor, order.currency),
            formatting.plain_amount(order.tax_minor, order.currency),
            f"{order.tax_rate:.2f}",
            str(order.shipping_address or ""),
            variant_name(order),
            formatting.plain_amount(order.shipping_minor, order.currency),
            formatting.plain_amount(order.shipping_tax_minor, order.currency),
            f"{order.shipping_tax_rate:.2f}",
            order.discount_code,
            formatting.plain_amount(order.discount_minor, order.currency),
        ]
        for order in orders
    ]


def variant_name(order: Order) -> str:
    """The variant bought ("" for a drop of one stock, whose one variant is unnamed)."""
    variant = order.hold.variant
    return variant.name if variant is not None else ""


def variant_names(*, drop_id: int | None) -> list[str]:
    """The variant names orders can be filtered by: the drop's in order, or every drop's named ones."""
    variants = Variant.objects.exclude(name="")
    if drop_id is not None:
        return list(variants.filter(drop_id=drop_id).order_by("position").values_list("name", flat=True))
    return sorted(set(variants.values_list("name", flat=True)))


def payments_needing_attention() -> dict[str, int]:
    """Payments the provider refused to capture or void for good: a person has to act."""
    counts = dict(
        Payment.objects.filter(state__in=NEEDS_ATTENTION).values_list("state").annotate(n=Count("id"))
    )
    return {str(state): counts.get(state, 0) for state in NEEDS_ATTENTION}


def disputes_by_state() -> dict[str, int]:
    """How many disputes are in each state (every state named, 0 included): the metric's series."""
    counts = dict(Dispute.objects.values_list("state").annotate(n=Count("id")))
    return {str(state): counts.get(state, 0) for state in DisputeState.values}


def open_disputes() -> int:
    """Disputes not decided yet: each one's evidence is due at the provider."""
    return Dispute.objects.exclude(state__in=DISPUTE_DECIDED).count()


def merchants_with_email() -> list[str]:
    """The addresses of the Merchants group's active members, in a stable order."""
    users = get_user_model().objects.filter(groups__name=MERCHANTS, is_active=True).exclude(email="")
    return sorted(set(users.values_list("email", flat=True)))


def outbox_backlog() -> tuple[int, float]:
    """Outbox messages not sent yet (those given up on included), and the oldest one's age in seconds."""
    unsent = OutboxMessage.objects.filter(sent_at__isnull=True)
    found = unsent.aggregate(n=Count("id"), oldest=Min("created_at"))
    oldest = found["oldest"]
    return found["n"], (timezone.now() - oldest).total_seconds() if oldest is not None else 0.0


def orders_of(*, buyer_id: int) -> list[Order]:
    """The buyer's latest orders, with their drops and the units (seats) of their holds."""
    return list(
        Order.objects.filter(buyer_id=buyer_id)
        .select_related("drop__product", "hold__variant")
        .prefetch_related("hold__units")[:100]
    )


def order_of_buyer(*, order_id: int, buyer_id: int) -> Order | None:
    """The buyer's own order with its hold and units; another buyer's is indistinguishable from none."""
    return (
        Order.objects.select_related("drop__product", "hold__variant", "shipping_address")
        .prefetch_related("hold__units")
        .filter(pk=order_id, buyer_id=buyer_id)
        .first()
    )


def order_answer(order: Order) -> answers.Order:
    return answers.Order(
        id=order.pk,
        hold=order.hold_id,
        drop=order.drop.slug,
        state=order.state,
        quantity=order.quantity,
        variant=variant_name(order),
        amount_minor=order.amount_minor,
        net_minor=order.amount_minor - order.tax_minor,
        tax_minor=order.tax_minor,
        tax_rate=f"{order.tax_rate:.2f}",
        currency=order.currency,
        failure_reason=order.failure_words,
        failure_code=failures.code(order.failure_reason),
        refunded=order.refunded,
        refunded_quantity=order.refunded_quantity,
        refunded_minor=order.refunded_minor,
        created_at=order.created_at,
        cancellable=cancellable(order),
        shipment=shipment_answer(order),
        shipping_minor=order.shipping_minor,
        shipping_tax_minor=order.shipping_tax_minor,
        shipping_tax_rate=f"{order.shipping_tax_rate:.2f}",
        discount=answers.OrderDiscount(code=order.discount_code, off_minor=order.discount_minor)
        if order.discount_code
        else None,
    )


def shipment_answer(order: Order) -> answers.Shipment | None:
    if order.shipped_at is None:
        return None
    return answers.Shipment(
        carrier=order.carrier,
        carrier_name=carriers.carrier_name(order.carrier),
        tracking_number=order.tracking_number,
        tracking_url=carriers.tracking_url(order),
        shipped_at=order.shipped_at,
    )


def order_json(order: Order) -> dict[str, object]:
    return order_answer(order).dump()


def cancellable(order: Order) -> bool:
    """Whether the buyer may still cancel: paying, or confirmed with the money not taken yet."""
    if order.state == OrderState.PENDING:
        return True
    return (
        order.state == OrderState.CONFIRMED
        and order.payments.filter(state=PaymentState.CAPTURE_PENDING).exists()
    )


def refund_json(refund: Refund) -> dict[str, object]:
    return answers.Refund(
        id=refund.pk,
        order=refund.order_id,
        state=refund.state,
        quantity=refund.quantity,
        amount_minor=refund.amount_minor,
        currency=refund.currency,
        restock=refund.restock,
        reason=refund.reason,
        created_at=refund.created_at,
    ).dump()


def unsettled_payment_ids(*, limit: int = 100) -> list[int]:
    return list(
        Payment.objects.filter(state__in=[PaymentState.CAPTURE_PENDING, PaymentState.VOID_PENDING])
        .order_by("updated_at")
        .values_list("pk", flat=True)[:limit]
    )


UNSENT_REFUND_AFTER = timedelta(seconds=60)


def unsent_refund_ids(*, limit: int = 100) -> list[int]:
    """Refunds still waiting for the provider's first answer a while after they were asked:
    their task was lost (each resend carries the same key: one refund at the provider)."""
    return list(
        Refund.objects.filter(
            state=RefundState.REQUESTED, updated_at__lt=timezone.now() - UNSENT_REFUND_AFTER
        )
        .order_by("updated_at")
        .values_list("pk", flat=True)[:limit]
    )


STALE_EVENT_AFTER = timedelta(seconds=30)
GIVE_UP_EVENT_AFTER = timedelta(days=1)


def stale_event_ids(*, limit: int = 100) -> list[int]:
    """Events recorded but not processed for a while: their task was lost or failed."""
    now = timezone.now()
    return list(
        WebhookEvent.objects.filter(
            processed_at__isnull=True,
            received_at__lt=now - STALE_EVENT_AFTER,
            received_at__gt=now - GIVE_UP_EVENT_AFTER,
        )
        .order_by("received_at")
        .values_list("pk", flat=True)[:limit]
    )


def sold_value(*, drop_ids: list[int]) -> dict[int, str]:
    """What each drop has taken, net of refunds, in the buyer's words ("€1,290.00"); drops with no
    paid order are absent. One query; orders of a drop share its product's currency."""
    taken = (
        Order.objects.filter(drop_id__in=drop_ids, state__in=[OrderState.CONFIRMED, OrderState.REFUNDED])
        .values("drop_id", "currency")
        .annotate(total=Sum("amount_minor") - Sum("refunded_minor"))
    )
    return {row["drop_id"]: formatting.money(row["total"], row["currency"]) for row in taken}


def exchange_answer(order: Order, listings: list[Listing]) -> answers.OrderExchange:
    return answers.OrderExchange(
        order=order.pk,
        drop=order.drop.slug,
        closes_at=order.drop.exchange_closes_at,
        listings=[
            answers.ExchangeListing(
                id=listing.pk,
                state=listing.state,
                price_minor=listing.price_minor,
                fee_minor=listing.fee_minor,
                refund_minor=listing.price_minor - listing.fee_minor,
            )
            for listing in listings
        ],
    )
