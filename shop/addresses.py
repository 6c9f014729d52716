"""A shipping address as a buyer types it: the one validation the hold page and the API share."""

from __future__ import annotations

import unicodedata
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from core import formatting
from shop.answers import ShippingAddress
from shop.models import ADDRESS_LIMITS, COUNTRIES, Address

REQUIRED = ("name", "line1", "postal_code", "city", "country")
OPTIONAL = ("line2", "region", "phone")
FIELDS = REQUIRED + OPTIONAL


def name_of(user: Any) -> str:
    """What to call a buyer in a greeting: the account's own name, else the name on their latest
    address; "" when neither is known (a username is often an e-mail's local part, not a name)."""
    if getattr(user, "pk", None) is None:
        return ""
    full = user.get_full_name().strip() if hasattr(user, "get_full_name") else ""
    if full:
        return str(full)
    latest = Address.objects.filter(user_id=user.pk).order_by("-id").values_list("name", flat=True).first()
    return latest or ""


def _printable(value: str) -> None:
    # A carrier's label takes one line per field: no control characters (NUL, tabs, new lines,
    # escape sequences), which PostgreSQL would refuse (NUL) or a label printer would mangle.
    if any(unicodedata.category(char) in {"Cc", "Cf", "Cs"} for char in value):
        raise forms.ValidationError(_("Use letters, digits and punctuation only (no control characters)."))


def country_choices() -> list[tuple[str, str]]:
    """The countries by their names in the buyer's language (a form's choices, read per form)."""
    named = ((code, formatting.country(code)) for code, _english in COUNTRIES)
    return [("", str(_("Choose…"))), *formatting.by_name(named)]


def _filled(autocomplete: str, **attrs: str) -> dict[str, str]:
    """A field's HTML attributes: what a browser's autofill puts there (WHATWG autocomplete tokens)."""
    return {"autocomplete": f"shipping {autocomplete}", **attrs}


class AddressForm(forms.Form):
    name = forms.CharField(
        max_length=ADDRESS_LIMITS["name"],
        label=_("Full name"),
        widget=forms.TextInput(attrs=_filled("name")),
    )
    line1 = forms.CharField(
        max_length=ADDRESS_LIMITS["line1"],
        label=_("Street and number"),
        widget=forms.TextInput(attrs=_filled("address-line1")),
    )
    line2 = forms.CharField(
        max_length=ADDRESS_LIMITS["line2"],
        required=False,
        label=_("Address, 2nd line"),
        widget=forms.TextInput(attrs=_filled("address-line2")),
    )
    postal_code = forms.CharField(
        max_length=ADDRESS_LIMITS["postal_code"],
        label=_("Postal code"),
        widget=forms.TextInput(attrs=_filled("postal-code")),
    )
    city = forms.CharField(
        max_length=ADDRESS_LIMITS["city"],
        label=_("City"),
        widget=forms.TextInput(attrs=_filled("address-level2")),
    )
    region = forms.CharField(
        max_length=ADDRESS_LIMITS["region"],
        required=False,
        label=_("Region or state"),
        widget=forms.TextInput(attrs=_filled("address-level1")),
    )
    country = forms.ChoiceField(
        label=_("Country"), choices=country_choices, widget=forms.Select(attrs=_filled("country"))
    )
    phone = forms.CharField(
        max_length=ADDRESS_LIMITS["phone"],
        required=False,
        label=_("Phone (carrier)"),
        widget=forms.TextInput(attrs=_filled("tel", type="tel", inputmode="tel")),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.validators.append(_printable)

    def clean_phone(self) -> str:
        phone = str(self.cleaned_data.get("phone", ""))
        if phone and not all(char.isdigit() or char in "+-() ./" for char in phone):
            raise forms.ValidationError(_("A phone number has digits, spaces and + - ( ) . / only."))
        return phone


def initial_from(address: Address | None) -> dict[str, str]:
    return {} if address is None else {field: getattr(address, field) for field in FIELDS}


def errors_of(form: AddressForm) -> dict[str, str]:
    """Field by field, for the API: {"country": "Select a valid choice. XX is not one of ..."}."""
    return {field: " ".join(str(m) for m in messages) for field, messages in form.errors.items()}


def address_json(address: Address) -> dict[str, object]:
    return ShippingAddress(id=address.pk, **{field: getattr(address, field) for field in FIELDS}).dump()
