"""Stock rows: buckets of identical units, or one row per labelled unit."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class StockBucket(models.Model):
    """One slice of a drop's stock; a drop's quantity is split over `bucket_count` of these."""

    drop = models.ForeignKey(
        "shop.Drop", on_delete=models.CASCADE, related_name="buckets", verbose_name=_("drop")
    )
    # The variant whose stock this is: a variant's buckets are indexes position * bucket_count
    # onward (inventory.services.bucket_range), so a hold's bucket_index names its variant too.
    variant = models.ForeignKey(
        "shop.Variant", on_delete=models.CASCADE, related_name="+", db_index=False, verbose_name=_("variant")
    )
    index = models.PositiveSmallIntegerField(verbose_name=_("index"))
    available = models.IntegerField(verbose_name=_("available"))
    # Units given back in a waiting-room drop: they go to the line's next tickets one by one
    # (sale/offers.py), never to whoever claims first, so no claim reads this column.
    returned = models.IntegerField(db_default=0, default=0, verbose_name=_("returned"))

    class Meta:
        verbose_name = _("stock bucket")
        verbose_name_plural = _("stock buckets")
        constraints = [
            models.UniqueConstraint(fields=["drop", "index"], name="inventory_stockbucket_drop_index"),
            models.CheckConstraint(
                condition=Q(available__gte=0), name="inventory_stockbucket_available_nonnegative"
            ),
            models.CheckConstraint(
                condition=Q(returned__gte=0), name="inventory_stockbucket_returned_nonnegative"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.drop_id}#{self.index}: {self.available} (+{self.returned} returned)"


class UnitState(models.TextChoices):
    AVAILABLE = "available", _("Available")
    RETURNED = (
        "returned",
        _("Returned"),
    )  # given back in a waiting-room drop: offered to the line's next ticket
    HELD = "held", _("Held")
    SOLD = "sold", _("Sold")


FREE = [UnitState.AVAILABLE, UnitState.RETURNED]


class Unit(models.Model):
    """One sellable unit (a seat, a numbered edition); `rank` orders "best available"."""

    drop = models.ForeignKey(
        "shop.Drop", on_delete=models.CASCADE, related_name="units", verbose_name=_("drop")
    )
    variant = models.ForeignKey(
        "shop.Variant", on_delete=models.CASCADE, related_name="+", db_index=False, verbose_name=_("variant")
    )
    label = models.CharField(max_length=40, verbose_name=_("label"))
    rank = models.PositiveIntegerField(verbose_name=_("rank"))
    state = models.CharField(
        max_length=10, choices=UnitState.choices, default=UnitState.AVAILABLE, verbose_name=_("state")
    )
    hold = models.ForeignKey(
        "holds.Hold",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="units",
        verbose_name=_("hold"),
    )
    sold_at = models.DateTimeField(null=True, blank=True, verbose_name=_("sold at"))

    class Meta:
        verbose_name = _("unit")
        verbose_name_plural = _("units")
        constraints = [
            models.UniqueConstraint(fields=["drop", "label"], name="inventory_unit_drop_label"),
            models.CheckConstraint(
                condition=Q(state__in=UnitState.values), name="inventory_unit_state_valid"
            ),
            # A held or sold unit always names its hold; a free one never does.
            models.CheckConstraint(
                condition=Q(state__in=FREE, hold__isnull=True) | (~Q(state__in=FREE) & Q(hold__isnull=False)),
                name="inventory_unit_hold_matches_state",
            ),
        ]
        indexes = [
            # Only claimable rows: SKIP LOCKED claims stay flat to the last unit.
            models.Index(
                fields=["drop", "variant", "rank"],
                condition=Q(state=UnitState.AVAILABLE),
                name="inventory_unit_claimable",
            ),
            models.Index(fields=["hold"], name="inventory_unit_hold"),
        ]

    def __str__(self) -> str:
        return f"{self.label} ({self.state})"
