"""Stock writes: laying out a drop's stock rows."""

from __future__ import annotations

from django.db import connection

from inventory.models import StockBucket, Unit
from shop.errors import InvalidInput
from shop.models import Drop, InventoryMode

MAX_LABEL_LENGTH = 40


def split_evenly(total: int, parts: int) -> list[int]:
    """Split `total` units over `parts` buckets, the remainder going to the first ones."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def configure_stock(*, drop: Drop, unit_labels: list[str] | None = None) -> None:
    """Create the stock rows of a new drop; runs inside the caller's transaction."""
    assert connection.in_atomic_block, "configure_stock must run inside the drop's transaction"
    if drop.inventory_mode == InventoryMode.BUCKETS:
        if unit_labels:
            raise InvalidInput("Unit labels only apply to a drop in units mode.")
        StockBucket.objects.bulk_create(
            StockBucket(drop=drop, index=i, available=n)
            for i, n in enumerate(split_evenly(drop.quantity, drop.bucket_count))
        )
        return
    labels = unit_labels or [str(n) for n in range(1, drop.quantity + 1)]
    if len(labels) != drop.quantity:
        raise InvalidInput(f"{len(labels)} unit labels given for a quantity of {drop.quantity}.")
    if len(set(labels)) != len(labels):
        raise InvalidInput("Unit labels must be unique.")
    if any(not label or len(label) > MAX_LABEL_LENGTH for label in labels):
        raise InvalidInput(f"Each unit label needs 1 to {MAX_LABEL_LENGTH} characters.")
    Unit.objects.bulk_create(
        (Unit(drop=drop, label=label, rank=rank) for rank, label in enumerate(labels)),
        batch_size=5000,
    )
