"""Checkout reads for merchants."""

from __future__ import annotations

from django.db.models import Count

from checkout.models import Order, Payment, PaymentState

NEEDS_ATTENTION = [PaymentState.CAPTURE_FAILED, PaymentState.VOID_FAILED]


def export_rows(*, drop_ids: list[int]) -> list[list[object]]:
    """One row per order of the drops, for the merchant's CSV export."""
    orders = (
        Order.objects.filter(drop_id__in=list(drop_ids))
        .select_related("drop", "buyer")
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
            f"{order.amount_minor / 100:.2f}",
            order.currency,
            order.state,
            order.refunded,
            order.created_at.isoformat(),
            order.failure_reason,
        ]
        for order in orders
    ]


def payments_needing_attention() -> dict[str, int]:
    """Payments the provider refused to capture or void for good: a person has to act."""
    counts = dict(
        Payment.objects.filter(state__in=NEEDS_ATTENTION).values_list("state").annotate(n=Count("id"))
    )
    return {str(state): counts.get(state, 0) for state in NEEDS_ATTENTION}
