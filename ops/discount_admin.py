"""Discount codes in the admin: the "add" page makes N codes at once (holds.discounts.generate_codes)
and shows them to copy; the list shows each code's uses.

Thin: the view parses its form and calls one service (rule 2 of the house style).
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from core.errors import FloodgateError
from holds import discounts
from holds.models import DiscountCode
from shop.models import Drop


class MakeCodesForm(forms.Form):
    drop = forms.ModelChoiceField(
        queryset=Drop.objects.filter(rehearsal_of__isnull=True).select_related("product"),
        required=False,
        label=_("Drop"),
        help_text=_("Empty: the codes are valid in every drop of the shop."),
    )
    count = forms.IntegerField(min_value=1, max_value=discounts.GENERATE_MAX, initial=100, label=_("Codes"))
    percent = forms.IntegerField(min_value=1, max_value=99, required=False, label=_("Percent off"))
    amount_minor = forms.IntegerField(
        min_value=1,
        max_value=discounts.AMOUNT_MAX,
        required=False,
        label=_("Or an amount off (minor units)"),
        help_text=_("In cents (or the currency's smallest unit): 500 = 5.00 off the line."),
    )
    currency = forms.CharField(
        max_length=3,
        required=False,
        label=_("Currency"),
        help_text=_("Of a shop-wide amount off, e.g. EUR (a drop's codes take its product's)."),
    )
    max_uses = forms.IntegerField(
        min_value=1,
        max_value=discounts.USES_MAX,
        initial=1,
        label=_("Uses each"),
        help_text=_("1 = single-use"),
    )
    starts_at = forms.DateTimeField(required=False, label=_("Valid from"))
    ends_at = forms.DateTimeField(required=False, label=_("Valid until"))


def add_view(admin: ModelAdmin[DiscountCode], request: HttpRequest) -> HttpResponse:
    """GET: the form. POST: make the codes and list them on the same page, or say what is wrong."""
    if not admin.has_add_permission(request):
        raise PermissionDenied
    form = MakeCodesForm(request.POST or None)
    made: list[DiscountCode] = []
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        terms = discounts.Terms(
            percent=data["percent"],
            amount_minor=data["amount_minor"],
            max_uses=data["max_uses"],
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
        )
        try:
            made = discounts.generate_codes(
                drop=data["drop"], count=data["count"], terms=terms, currency=(data["currency"] or "").upper()
            )
        except FloodgateError as error:
            form.add_error(None, str(error.detail))
        else:
            said = ngettext("%(count)s discount code made.", "%(count)s discount codes made.", len(made))
            messages.success(request, said % {"count": len(made)})
    context = {
        **admin.admin_site.each_context(request),
        "title": gettext("Make discount codes"),
        "opts": DiscountCode._meta,
        "form": form,
        "made": "\n".join(code.code for code in made),
    }
    return TemplateResponse(request, "admin/holds/discountcode/make.html", context)
