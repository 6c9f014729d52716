"""Products in the admin: the price typed in major units, the picture checked, and shipping
zones once a product ships."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.options import InlineModelAdmin
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from core.errors import FloodgateError
from ops.variant_admin import MINOR_PER_MAJOR, PRICE_MAX
from shop import pictures
from shop.models import (
    Product,
    ShippingZone,
)

# Prices are stored in minor units (cents); people type and read them in major ones (two decimal
# places, as shop.models.money shows them), up to what price_minor's column holds.


class ProductForm(forms.ModelForm):
    price = forms.DecimalField(
        min_value=Decimal(0),
        max_value=PRICE_MAX,
        decimal_places=2,
        label=_("Price"),
        help_text=_("In the currency's units, e.g. 129.00 (kept in cents)."),
    )
    image_url = forms.URLField(
        required=False,
        assume_scheme="https",
        max_length=200,
        label=_("Image URL"),
        help_text=_("Or the address of a picture hosted elsewhere."),
    )

    class Meta:
        model = Product
        fields = [
            "sku",
            "name",
            "description",
            "price",
            "currency",
            "tax_rate",
            "ships",
            "image",
            "image_url",
        ]

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["tax_rate"].required = False
        self.fields["ships"].help_text = format_lazy(
            "{} {}",
            self.fields["ships"].help_text,
            _(
                "Once saved as shipped, the product's page lists its shipping zones: the countries "
                "it goes to and their fees. Without a zone it ships everywhere, free."
            ),
        )
        if self.instance.pk is not None:
            major = Decimal(self.instance.price_minor) / MINOR_PER_MAJOR
            self.initial.setdefault("price", major.quantize(Decimal("0.01")))

    def clean_tax_rate(self) -> Decimal:
        # Left empty (or a form from before the field): untaxed, the column's default.
        rate = self.cleaned_data.get("tax_rate")
        return rate if isinstance(rate, Decimal) else Decimal(0)

    def clean_image(self) -> object:
        image = self.cleaned_data.get("image")
        if not isinstance(image, UploadedFile):  # the picture kept, or cleared
            return image
        try:
            return pictures.cleaned(image)
        except FloodgateError as error:
            raise forms.ValidationError(error.detail) from None

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        price = data.get("price")
        if isinstance(price, Decimal):
            self.instance.price_minor = int(price * MINOR_PER_MAJOR)  # exact: two decimal places
        return data


class ShippingZoneFormSet(forms.BaseInlineFormSet):
    def clean(self) -> None:
        """No country in two zones: which fee would its buyers pay? (catalogue.services.check_zones)"""
        super().clean()
        kept = [
            form.cleaned_data.get("countries") or []
            for form in self.forms
            if form.cleaned_data and not form.cleaned_data.get("DELETE")
        ]
        named = [code for codes in kept for code in codes]
        twice = sorted({code for code in named if named.count(code) > 1})
        if twice:
            raise ValidationError(
                _("A country may be in one shipping zone only: %(codes)s.") % {"codes": ", ".join(twice)}
            )


class ShippingZoneInline(admin.TabularInline):
    """Where a product that ships goes and what it costs there (shop.shipping): none ships everywhere free."""

    model = ShippingZone
    formset = ShippingZoneFormSet
    fields = ["name", "countries", "fee_minor", "fee_basis", "tax_rate"]
    extra = 0


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    form = ProductForm

    def get_inlines(
        self, request: HttpRequest, obj: Product | None
    ) -> list[type[InlineModelAdmin[Any, Any]]]:
        """Zones for a product saved as one that ships (tick "ships", save, then add them)."""
        return [ShippingZoneInline] if obj is not None and obj.ships else []

    list_display = ["name", "sku", "price", "tax_rate", "ships"]
    search_fields = ["name", "sku"]
    list_filter = ["currency"]

    @admin.display(description=_("price"), ordering="price_minor")
    def price(self, product: Product) -> str:
        return product.price_display  # with its currency, so no column of its own
