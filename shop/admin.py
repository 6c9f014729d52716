"""The shop's identity and legal pages in the admin: one "Shop" page (the list goes straight to
it), its legal texts below it per language. The form checks the input (VAT ID, colour, logo by its
content); saving is shop.setup.save_row, inside the admin's transaction."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.core.files.uploadedfile import UploadedFile
from django.db import models
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from core.errors import FloodgateError
from shop import identity, setup
from shop.models import LegalText, ShopSettings, normal_colour, normal_vat_id


class ShopSettingsForm(forms.ModelForm):
    support_url = forms.URLField(label=_("support URL"), required=False, assume_scheme="https")

    class Meta:
        model = ShopSettings
        fields = [
            "name",
            "logo",
            "accent_colour",
            "legal_name",
            "address",
            "vat_id",
            "contact_email",
            "support_url",
            "prices_include_tax",
        ]
        widgets = {"accent_colour": forms.TextInput(attrs={"type": "color"})}

    def clean_vat_id(self) -> str:
        return normal_vat_id(str(self.cleaned_data.get("vat_id") or ""))

    def clean_accent_colour(self) -> str:
        return normal_colour(str(self.cleaned_data.get("accent_colour") or ""))

    def clean_logo(self) -> object:
        logo = self.cleaned_data.get("logo")
        if not isinstance(logo, UploadedFile):  # the logo kept, or cleared
            return logo
        try:
            return identity.cleaned_logo(logo)
        except FloodgateError as error:
            raise forms.ValidationError(error.detail) from None


class LegalTextInline(admin.StackedInline):
    model = LegalText
    fields = ["kind", "language", "body"]
    readonly_fields = ["kind", "language"]
    extra = 0
    can_delete = False
    formfield_overrides = {models.TextField: {"widget": forms.Textarea(attrs={"rows": 14, "cols": 90})}}

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # every page and language is written from its template when the shop is saved


@admin.register(ShopSettings)
class ShopSettingsAdmin(admin.ModelAdmin):
    form = ShopSettingsForm
    inlines = [LegalTextInline]
    change_form_template = "admin/shop/shopsettings/change_form.html"
    fieldsets = [
        (None, {"fields": ["name", "logo", "accent_colour"]}),
        (_("Seller"), {"fields": ["legal_name", "address", "vat_id", "contact_email", "support_url"]}),
        (None, {"fields": ["prices_include_tax"]}),
    ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """One shop, one page: the list is the page (or the form that creates it)."""
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied  # as Django's own list would: no hint that the page exists
        if ShopSettings.objects.filter(pk=1).exists():
            return HttpResponseRedirect(reverse("admin:shop_shopsettings_change", args=[1]))
        return HttpResponseRedirect(reverse("admin:shop_shopsettings_add"))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return super().has_add_permission(request) and not ShopSettings.objects.filter(pk=1).exists()

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        # Until the merchant says otherwise, as the environment said (PRICES_INCLUDE_TAX).
        return {"prices_include_tax": settings.PRICES_INCLUDE_TAX}

    def save_model(self, request: HttpRequest, obj: ShopSettings, form: Any, change: bool) -> None:
        setup.save_row(obj)
