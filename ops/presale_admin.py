"""The drop's presale page in the admin: generate codes, export them as CSV, upload the list.

Thin: each view parses its form and calls one holds.presale service (rule 2 of the house style).
Reading the page and the CSV needs the drop's view permission; changing it, its change permission.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from core.errors import FloodgateError
from holds import presale
from holds.models import PresaleCode, PresaleListEntry
from shop.models import Drop

LIST_UPLOAD_MAX = 5_000_000  # bytes of a list file read


class GenerateCodesForm(forms.Form):
    count = forms.IntegerField(min_value=1, max_value=presale.GENERATE_MAX, initial=100, label=_("Codes"))
    max_uses = forms.IntegerField(
        min_value=1,
        max_value=presale.USES_MAX,
        initial=1,
        label=_("Uses each"),
        help_text=_("1 = single-use"),
    )


class PresaleListForm(forms.Form):
    emails = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 5, "cols": 60}),
        label=_("E-mail addresses"),
        help_text=_("One per line, or separated by commas or semicolons."),
    )
    emails_file = forms.FileField(
        required=False, label=_("Or a CSV file"), help_text=_("An address per row.")
    )

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        text = str(data.get("emails") or "")
        upload = data.get("emails_file")
        if upload is not None:
            try:
                text += "\n" + upload.read(LIST_UPLOAD_MAX).decode("utf-8-sig")
            except UnicodeDecodeError:
                raise forms.ValidationError(gettext("Upload a UTF-8 CSV file.")) from None
        try:
            data["addresses"] = presale.addresses_in(text)
        except FloodgateError as error:
            raise forms.ValidationError(error.detail) from None
        if not data["addresses"]:
            raise forms.ValidationError(gettext("Paste or upload at least one e-mail address."))
        return data


def page(admin: ModelAdmin[Drop], request: HttpRequest, drop_id: int) -> HttpResponse:
    """GET: the presale's codes and list in numbers, with the forms. POST: generate or upload."""
    drop = _drop(admin, request, drop_id, change=request.method == "POST")
    generate, upload = GenerateCodesForm(prefix="codes"), PresaleListForm(prefix="list")
    if request.method == "POST":
        if "generate" in request.POST:
            generate = GenerateCodesForm(request.POST, prefix="codes")
            if generate.is_valid():
                made = presale.generate_codes(
                    drop=drop,
                    count=generate.cleaned_data["count"],
                    max_uses=generate.cleaned_data["max_uses"],
                )
                said = ngettext(
                    "%(count)s presale code made for %(slug)s; export it below.",
                    "%(count)s presale codes made for %(slug)s; export them below.",
                    len(made),
                )
                messages.success(request, said % {"count": len(made), "slug": drop.slug})
                return redirect(reverse("admin:shop_drop_presale", args=[drop.pk]))
        elif "upload" in request.POST:
            upload = PresaleListForm(request.POST, request.FILES, prefix="list")
            if upload.is_valid():
                addresses = upload.cleaned_data["addresses"]
                added = presale.add_to_list(drop=drop, emails=addresses)
                said = ngettext(
                    "%(count)s address added to the list (%(known)s were on it).",
                    "%(count)s addresses added to the list (%(known)s were on it).",
                    added,
                )
                messages.success(request, said % {"count": added, "known": len(addresses) - added})
                return redirect(reverse("admin:shop_drop_presale", args=[drop.pk]))
        else:
            return HttpResponseNotAllowed(["GET"])
    codes = PresaleCode.objects.filter(drop=drop)
    context = {
        **admin.admin_site.each_context(request),
        "title": gettext("Presale of %(drop)s") % {"drop": drop.display_title},
        "drop": drop,
        "opts": Drop._meta,
        "codes": codes.count(),
        "codes_used": codes.filter(uses__gt=0).count(),
        "listed": PresaleListEntry.objects.filter(drop=drop).count(),
        "generate": generate,
        "upload": upload,
    }
    return TemplateResponse(request, "admin/shop/drop/presale.html", context)


def codes_csv(admin: ModelAdmin[Drop], request: HttpRequest, drop_id: int) -> HttpResponse:
    """The drop's codes as a CSV file: code, max_uses, uses."""
    drop = _drop(admin, request, drop_id, change=False)
    response = HttpResponse(presale.codes_csv(drop=drop), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="presale-codes-{drop.slug}.csv"'
    return response


def _drop(admin: ModelAdmin[Drop], request: HttpRequest, drop_id: int, *, change: bool) -> Drop:
    drop = get_object_or_404(Drop.objects.select_related("product"), pk=drop_id)
    allowed = admin.has_change_permission if change else admin.has_view_permission
    if not allowed(request, drop):
        raise PermissionDenied
    return drop
