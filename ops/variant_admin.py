"""The drop page's variants inline (sizes, colours, tiers): the rows a merchant types, checked as
catalogue.services checks them, and what saving them asks of the services (ops.drop_admin calls them)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, cast

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from catalogue.services import NewVariant, check_variants
from core.errors import FloodgateError
from holds.counts import invariant_by_variant
from shop.models import MAX_VARIANTS, Drop, Variant

MINOR_PER_MAJOR = 100  # as the product's price: typed in major units, kept in minor ones
PRICE_MAX = Decimal(2**31 - 1) / MINOR_PER_MAJOR


# Generic in django-stubs only: a subscripted base would need its monkeypatch at runtime.
class VariantForm(forms.ModelForm):  # type: ignore[type-arg]
    quantity = forms.IntegerField(
        min_value=1,
        label=_("Quantity"),
        error_messages={"min_value": _("A variant needs at least 1 unit.")},
        help_text=_("Units on sale."),
    )
    price = forms.DecimalField(
        required=False,
        min_value=Decimal(0),
        max_value=PRICE_MAX,
        decimal_places=2,
        label=_("Price"),
        help_text=_("Empty: the product's price."),
    )

    class Meta:
        model = Variant
        fields = ["name", "quantity"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None and self.instance.price_minor is not None:
            major = Decimal(self.instance.price_minor) / MINOR_PER_MAJOR
            self.initial.setdefault("price", major.quantize(Decimal("0.01")))

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        price = data.get("price")
        self.instance.price_minor = int(price * MINOR_PER_MAJOR) if isinstance(price, Decimal) else None
        return data

    @property
    def wanted(self) -> NewVariant:
        data = self.cleaned_data
        return NewVariant(str(data["name"]), int(data["quantity"]), self.instance.price_minor)


@dataclass(frozen=True)
class Plan:
    """What the saved rows ask for: a new set of variants (on add, or a change of names, rows
    added or removed), else quantities and prices of the variants kept."""

    variants: list[NewVariant]
    relayout: bool
    quantities: dict[int, int]  # variant id -> new quantity
    prices: dict[int, int | None]


class VariantFormSet(forms.BaseInlineFormSet):  # type: ignore[type-arg]
    """The rows checked together, against the drop the form above is making or changing."""

    instance: Drop
    plan: Plan | None = None

    def clean(self) -> None:
        super().clean()  # duplicate names among the rows are Django's formset error
        if any(self.errors) or self.non_form_errors():
            return
        drop = self.instance
        if None in (drop.starts_at, drop.inventory_mode, drop.bucket_count):
            return  # the drop's own form says what is wrong with it first
        forms_ = cast(list[VariantForm], self.forms)
        kept = [f for f in forms_ if f.has_changed() or f.instance.pk is not None]
        rows = [f for f in kept if f.cleaned_data and not f.cleaned_data.get("DELETE")]
        wanted = [f.wanted for f in rows]
        adding = drop.pk is None
        removed = any(f.cleaned_data.get("DELETE") and f.instance.pk is not None for f in kept)
        renamed = any(f.instance.pk is not None and "name" in f.changed_data for f in rows)
        added = any(f.instance.pk is None for f in rows)
        relayout = adding or removed or renamed or added
        quantity = sum(v.quantity for v in wanted) if wanted else drop.quantity
        if quantity is None:
            raise forms.ValidationError(gettext("Give the drop's quantity above, or its variants here."))
        labels = bool(str(self.data.get("unit_labels", "")).strip()) or "unit_labels_file" in self.files
        try:
            check_variants(
                quantity=quantity if wanted or adding else drop.quantity,
                variants=wanted or None,
                redis_gate=drop.redis_gate,
                inventory_mode=drop.inventory_mode,
                bucket_count=drop.bucket_count,
                unit_labels=labels,
            )
        except FloodgateError as error:
            raise forms.ValidationError(error.detail) from None
        if adding and wanted and drop.quantity is not None and drop.quantity != quantity:
            raise forms.ValidationError(
                gettext(
                    "The variants add up to %(sum)s units, not the drop's %(quantity)s: "
                    "leave the quantity empty (it becomes their sum) or make them match."
                )
                % {"sum": quantity, "quantity": drop.quantity}
            )
        if not adding and relayout and timezone.now() >= drop.starts_at:
            raise forms.ValidationError(
                gettext(
                    "Variants can be added, renamed or removed only before the sale starts; "
                    "change their quantities instead."
                )
            )
        self.plan = Plan(
            variants=wanted,
            relayout=relayout,
            quantities={} if relayout else self._quantities(drop, rows),
            prices={f.instance.pk: f.instance.price_minor for f in rows if f.instance.pk is not None},
        )
        if adding and drop.quantity is None:
            drop.quantity = quantity

    def _quantities(self, drop: Drop, rows: list[VariantForm]) -> dict[int, int]:
        """The quantities changed, each checked against its variant's held and sold units."""
        changed = {f.instance.pk: f.cleaned_data["quantity"] for f in rows if "quantity" in f.changed_data}
        if not changed:
            return {}
        counts = {v.name: v for v in invariant_by_variant(drop_id=drop.pk)}
        for form in rows:
            numbers = counts.get(form.instance.name)
            wanted = changed.get(form.instance.pk)
            if numbers is None or wanted is None:
                continue
            sold = numbers.sold + numbers.refunded + numbers.exchange  # a unit on the exchange is still sold
            taken = numbers.held + sold
            if wanted < taken:
                form.add_error(
                    "quantity",
                    gettext("%(held)s held and %(sold)s sold: at least %(least)s.")
                    % {"held": numbers.held, "sold": sold, "least": taken},
                )
                raise forms.ValidationError(
                    gettext("%(variant)s's quantity cannot go below %(least)s.")
                    % {"variant": form.instance.name, "least": taken}
                )
        return changed


def _started(drop: Drop | None) -> bool:
    return drop is not None and drop.pk is not None and timezone.now() >= drop.starts_at


class VariantInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Variant
    form = VariantForm
    formset = VariantFormSet
    fields = ["name", "quantity", "price"]
    extra = 3
    max_num = MAX_VARIANTS
    verbose_name = _("variant (size, colour, tier)")
    verbose_name_plural = _(
        "Variants: each with its own stock (and price, if it differs). Leave empty to sell one stock; "
        "with several, the drop's quantity is their sum. Added, renamed or removed only before the start."
    )

    # A drop's variants are part of the drop: whoever may add or change the drop may set them.
    def has_view_permission(self, request: HttpRequest, obj: Drop | None = None) -> bool:
        return request.user.has_perm("shop.view_drop") or request.user.has_perm("shop.change_drop")

    def has_add_permission(self, request: HttpRequest, obj: Drop | None = None) -> bool:
        return request.user.has_perm("shop.add_drop" if obj is None else "shop.change_drop")

    def has_change_permission(self, request: HttpRequest, obj: Drop | None = None) -> bool:
        return request.user.has_perm("shop.add_drop" if obj is None else "shop.change_drop")

    def has_delete_permission(self, request: HttpRequest, obj: Drop | None = None) -> bool:
        return self.has_change_permission(request, obj) and not _started(obj)

    def get_extra(self, request: HttpRequest, obj: Drop | None = None, **kwargs: Any) -> int:
        return 0 if _started(obj) else self.extra  # rows are added only before the start

    def get_queryset(self, request: HttpRequest) -> QuerySet[Variant]:
        # A drop of one stock has one variant, unnamed, that the quantity above already says.
        return super().get_queryset(request).exclude(name="")
