"""Drops in the admin: the form in the merchant's words, its variants, stock moved through the
services, the kill switch, sales, presale and rehearsal pages, and the live dashboard."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from functools import partial
from typing import Any

from csp.constants import SELF, UNSAFE_INLINE
from csp.decorators import csp_replace
from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.core.exceptions import PermissionDenied
from django.core.serializers.json import DjangoJSONEncoder
from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.forms.formsets import BaseFormSet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.html import format_html, format_html_join
from django.utils.text import format_lazy
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from admission import beacon, drawing
from admission.models import Queue, Ticket
from catalogue import services
from checkout import selectors as checkout_selectors
from core import formatting
from core.errors import FloodgateError
from core.http import safe_next
from core.spreadsheets import spreadsheet_safe
from holds.counts import invariant
from inventory import selectors as inventory_selectors
from inventory import services as inventory
from ops import access, dashboard, presale_admin, rehearsal, sales, switch
from ops.variant_admin import Plan, VariantFormSet, VariantInline
from shop.models import (
    EXCHANGE_RULE,
    Drop,
    DropFormat,
    DropState,
    InventoryMode,
    PauseAction,
    Variant,
)

STOCK_FIELDS = {"quantity", "inventory_mode", "bucket_count"}
PAUSE_FIELDS = {"paused", "paused_at", "paused_by", "pause_reason"}
REFUSED = "floodgate_refused"  # the request's attribute: why the service refused its first save


class Refused(Exception):
    """A service refused the admin's save (its words in `detail`)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class DropForm(forms.ModelForm):
    unit_labels = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        label=_("Unit labels"),
        help_text=_(
            "Units mode only, when creating: labels or ranges, e.g. 'A1-A20, B1-B20, VIP1-VIP5'. "
            "Their count must equal the quantity. Leave empty to number the units 1..N."
        ),
    )
    unit_labels_file = forms.FileField(
        required=False,
        label=_("Unit labels file"),
        help_text=_("Or upload a CSV file of labels (cells and ranges as above)."),
    )
    # The drop's two flags (waiting_room, raffle) as the one choice a merchant makes.
    format = forms.TypedChoiceField(
        choices=DropFormat.choices,
        coerce=DropFormat,
        required=False,
        label=_("Format"),
        help_text=_(
            "First come: anyone may buy from the start. Waiting room: buyers who come before the "
            "start are drawn into a line and let in in waves. Raffle: entries until the start, then the "
            "draw ranks them; the first ranked get a unit each to pay for within the offer time, and an "
            "unpaid win passes to the next entry."
        ),
    )

    refused: str | None = None  # why the services refused this form's first save (DropAdmin)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "format" in self.fields:
            self.fields["format"].initial = self.instance.format
        if self.instance.pk is None and "quantity" in self.fields:
            self.fields["quantity"].required = False
            self.fields["quantity"].help_text = _("Units on sale. With variants below: empty, their sum.")
        if "exchange_fee_minor" in self.fields:  # a form that does not post it (a script) keeps no fee
            self.fields["exchange_fee_minor"].required = False

    def clean_exchange_fee_minor(self) -> int:
        fee = self.cleaned_data.get("exchange_fee_minor")
        return self.instance.exchange_fee_minor if fee is None else int(fee)

    class Meta:
        model = Drop
        fields = [
            "product",
            "slug",
            "title",
            "starts_at",
            "ends_at",
            "presale_starts_at",
            "quantity",
            "inventory_mode",
            "bucket_count",
            "hold_seconds",
            "offer_seconds",
            "per_buyer_limit",
            "waiting_room",
            "raffle",
            "admission_wave_seconds",
            "admission_percent",
            "join_work_bits",
            "redis_gate",
            "exchange_closes_at",
            "exchange_fee_minor",
        ]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.refused is not None:
            self.add_error(None, self.refused)
        chosen = data.get("format") or self.instance.format  # not posted (a script): kept as it was
        data["waiting_room"] = chosen != DropFormat.FIRST_COME
        data["raffle"] = chosen == DropFormat.RAFFLE
        self.instance.waiting_room, self.instance.raffle = data["waiting_room"], data["raffle"]
        closes, ends = data.get("exchange_closes_at"), data.get("ends_at") or self.instance.ends_at
        mode = data.get("inventory_mode") or self.instance.inventory_mode
        if closes is not None and (
            not data["waiting_room"] or mode == InventoryMode.UNITS or (ends is not None and closes <= ends)
        ):
            self.add_error("exchange_closes_at", EXCHANGE_RULE)  # the constraint, said beside its field
        text = str(data.get("unit_labels") or "")
        upload = data.get("unit_labels_file")
        if upload is not None:
            try:
                upload.seek(0)  # read again when a refused save shows the form anew
                text += "\n" + upload.read(2_000_000).decode("utf-8-sig")
            except UnicodeDecodeError:
                self.add_error("unit_labels_file", gettext("Upload a UTF-8 CSV file."))
                return data
        if not text.strip():
            data["labels"] = None
            return data
        if data.get("inventory_mode") != InventoryMode.UNITS:
            self.add_error("unit_labels", gettext("Labels are for a drop in units mode; pick 'Units' above."))
            return data
        try:
            labels = inventory.parse_labels(text)
        except FloodgateError as error:
            self.add_error("unit_labels", error.detail)
            return data
        if data.get("quantity") is not None and len(labels) != data["quantity"]:
            words = ngettext(
                "%(count)s label for a quantity of %(quantity)s; make them match.",
                "%(count)s labels for a quantity of %(quantity)s; make them match.",
                len(labels),
            )
            self.add_error("unit_labels", words % {"count": len(labels), "quantity": data["quantity"]})
        data["labels"] = labels
        return data

    def clean_quantity(self) -> int | None:
        quantity: int | None = self.cleaned_data["quantity"]
        if self.instance.pk is not None:
            numbers = invariant(drop_id=self.instance.pk)
            sold = numbers.sold + numbers.exchange  # a unit on the exchange is still its seller's
            if quantity is not None and quantity < numbers.held + sold:
                raise forms.ValidationError(
                    gettext(
                        "%(held)s units are held and %(sold)s sold; the quantity cannot go below %(least)s."
                    )
                    % {"held": numbers.held, "sold": sold, "least": numbers.held + sold}
                )
        return quantity


DEFAULT_REHEARSAL_BUYERS = 500


def dashboard_words() -> dict[str, object]:
    """The dashboard script's words in the request's language (the script holds none of its own);
    {name} is filled in by the script."""
    return {
        "state": {str(state.value): str(state.label) for state in DropState},
        "columns": {
            "variant": gettext("variant"),
            "quantity": gettext("quantity"),
            "available": gettext("available"),
            "held": gettext("held"),
            "sold": gettext("sold"),
            "refunded": gettext("refunded"),
            "exchange": gettext("on the exchange"),
            "drift": gettext("drift"),
        },
        "taken": gettext("taken, net of refunds"),
        "taken_title": gettext("What the confirmed orders of this drop paid, less what was refunded"),
        "expired": gettext("expired, unreclaimed"),
        "drift_long": gettext("drift (0 = every unit counted once)"),
        "drift_title": gettext(
            "quantity minus available, held, sold, refunded and on the exchange; not 0 pauses the drop"
        ),
        "stranded": gettext("stranded (too thin to claim)"),
        "stranded_title": gettext(
            "Units no single bucket can serve at the per-buyer limit; the next claim gathers them"
        ),
        "queue": gettext("queue / admitted"),
        "returning": gettext("returning to the line"),
        "returning_title": gettext(
            "Units given back, waiting to be offered to the next ticket (sale.offer_returns, every second)"
        ),
        "gate": gettext("gate / database"),
        "gate_title": gettext(
            "Redis gate count / units a claim could take (available + expired, unreclaimed); in flight: {n}"
        ),
        "gate_refusals": gettext("gate refusals"),
        "claims_per_second": gettext("claims/s"),
        "rejections_per_second": gettext("rejections/s"),
        "drop_drift": gettext(
            "Drift of {n} units in {slug}: units counted twice or lost; the drop is paused"
        ),
        "variant_drift": gettext("Drift of {n} units in {variant} of {slug}"),
        "paused": gettext("Paused: {reason}"),
        "buckets": gettext("buckets:"),
        "last_minutes": gettext("last 10 minutes:"),
        "claims": gettext("claims"),
        "rejections": gettext("rejections"),
        "event": gettext("{at} {action} by {by}"),
        "event_reason": gettext("{at} {action} by {by}: {reason}"),
        "actions": {str(action.value): str(action.label) for action in PauseAction},
        "invariant_drift": gettext("Invariant drift in {slug}: {n} units"),
        "duty_late": gettext("Duty {name} has not run for {age} s"),
        "celery_down": gettext(
            "Celery is not running {names}: web processes cover (restart beat and the worker)"
        ),
        "seconds": gettext("{n} s"),
        "ago": gettext("{n} s ago"),
        "no_drops": gettext("No drop is on sale, starting within the hour or just ended."),
    }


class DropActionForm(ActionForm):
    """The changelist's action bar, with the crowd's size for "Rehearse this drop"."""

    buyers = forms.CharField(
        required=False, label=_("buyers (rehearsal)"), widget=forms.TextInput(attrs={"size": 6}),
        help_text=format_lazy(_("default {n}"), n=DEFAULT_REHEARSAL_BUYERS),
    )  # fmt: skip
    # a CharField: the action, not the form, says what is wrong with "abc" (ops.rehearsal.parse_buyers)


@admin.register(Drop)
class DropAdmin(admin.ModelAdmin):
    form = DropForm
    inlines = [VariantInline]
    actions = ["duplicate_drops", "export_orders_csv", "rehearse_drop"]
    action_form = DropActionForm
    # Six narrow columns, so the list fits a 1280 px screen between the admin's sidebar and its
    # filters (ten did not: the starts, ends, waiting room and orders fell off the right edge).
    list_display = [
        "drop_display",
        "state_display",
        "sale_window",
        "stock_display",
        "room_display",
        "orders_link",
    ]
    list_display_links = ["drop_display"]
    list_filter = ["paused", "inventory_mode", "waiting_room", "starts_at"]
    search_fields = ["slug", "title", "product__name", "product__sku"]
    date_hierarchy = "starts_at"
    list_select_related = ["product"]
    readonly_fields = [
        "paused",
        "paused_at",
        "paused_by",
        "pause_reason",
        "created_at",
        "last_rehearsal",
        "draw_commitment",
    ]
    fieldsets = [
        (None, {"fields": ["product", "slug", "title"]}),
        (_("When"), {"fields": ["starts_at", "ends_at", "presale_starts_at"]}),
        (_("Stock"), {"fields": ["quantity", "inventory_mode", "unit_labels", "unit_labels_file"]}),
        (
            _("Buyers and waiting room"),
            {"fields": ["hold_seconds", "per_buyer_limit", "format", "offer_seconds", "draw_commitment"]},
        ),
        # Tuning for a crowd: each has a default that serves a sale; folded, so a merchant is not
        # asked about buckets, the Redis gate or proof-of-work bits (an error in one unfolds it).
        (
            _("Advanced"),
            {
                "classes": ["collapse"],
                "description": _(
                    "Tuning for very large crowds. The defaults suit a sale; change them only on advice."
                ),
                "fields": [
                    "bucket_count",
                    "admission_wave_seconds",
                    "admission_percent",
                    "join_work_bits",
                    "line_close_seconds",
                    "draw_round_wait_seconds",
                    "redis_gate",
                ],
            },
        ),
        (_("Face-value exchange"), {"fields": ["exchange_closes_at", "exchange_fee_minor"]}),
        (_("Kill switch"), {"fields": ["paused", "paused_at", "paused_by", "pause_reason"]}),
        (_("Rehearsal"), {"fields": ["last_rehearsal"]}),
    ]

    @admin.display(description=_("state"))
    def state_display(self, drop: Drop) -> str:
        return str(drop.state.label)

    change_form_template = "admin/shop/drop/change_form.html"

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("dashboard/", wrap(self.dashboard_view), name="shop_drop_dashboard"),
            path("dashboard/data/", wrap(self.dashboard_data), name="shop_drop_dashboard_data"),
            path("<int:drop_id>/pause/", wrap(self.pause_view), name="shop_drop_pause"),
            path("<int:drop_id>/resume/", wrap(self.resume_view), name="shop_drop_resume"),
            path("<int:drop_id>/rehearsal/", wrap(self.rehearsal_view), name="shop_drop_rehearsal"),
            path(
                "<int:drop_id>/rehearsal/<int:report_id>/",
                wrap(self.rehearsal_view),
                name="shop_drop_rehearsal_report",
            ),
            path("<int:drop_id>/sales/", wrap(self.sales_view), name="shop_drop_sales"),
            path("<int:drop_id>/presale/", wrap(self.presale_view), name="shop_drop_presale"),
            path(
                "<int:drop_id>/presale/codes.csv",
                wrap(self.presale_codes_csv),
                name="shop_drop_presale_codes",
            ),
            *super().get_urls(),
        ]

    def _may_watch(self, request: HttpRequest) -> None:
        if not access.may_watch(request.user):
            raise PermissionDenied

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        self._may_watch(request)
        snapshot = dashboard.snapshot()
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Invariant dashboard"),
            "words": dashboard_words(),
            "may_pause": request.user.has_perm("shop.pause_drop"),
            "snapshot": snapshot,
            # Embedded as JSON for the first paint; escaped for a <script> block.
            "snapshot_json": json.dumps(snapshot, cls=DjangoJSONEncoder).replace("<", "\\u003c"),
        }
        return TemplateResponse(request, "admin/shop/drop/dashboard.html", context)

    def sales_view(self, request: HttpRequest, drop_id: int) -> HttpResponse:
        """Units sold and revenue over the drop's first minutes, drawn, with the table beneath."""
        drop = get_object_or_404(Drop.objects.select_related("product"), pk=drop_id)
        if not self.has_view_permission(request, drop):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Sales of %(drop)s") % {"drop": drop.display_title},
            "drop": drop,
            "sales": sales.sales(drop),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/shop/drop/sales.html", context)

    def presale_view(self, request: HttpRequest, drop_id: int) -> HttpResponse:
        return presale_admin.page(self, request, drop_id)

    def presale_codes_csv(self, request: HttpRequest, drop_id: int) -> HttpResponse:
        return presale_admin.codes_csv(self, request, drop_id)

    def dashboard_data(self, request: HttpRequest) -> JsonResponse:
        self._may_watch(request)
        return JsonResponse(dashboard.snapshot())

    def _switch(self, request: HttpRequest, drop_id: int, *, pause: bool) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not request.user.has_perm("shop.pause_drop"):
            raise PermissionDenied
        drop = get_object_or_404(Drop, pk=drop_id)
        reason = request.POST.get("reason", "")
        try:
            if pause:
                result = switch.pause_drop(drop=drop, actor_id=request.user.pk, reason=reason)
            else:
                result = switch.resume_drop(drop=drop, actor_id=request.user.pk, reason=reason)
        except FloodgateError as error:
            messages.error(request, error.detail)
        else:
            # The drop by title and slug in a sentence: a bare slug first reads as a name ("Demo-sneaker").
            if pause and result.changed:
                said = gettext(
                    "The sale of %(title)s (%(slug)s) is paused: nobody can reserve until it is resumed."
                )
            elif pause:
                said = gettext("The sale of %(title)s (%(slug)s) was paused already.")
            elif result.changed:
                said = gettext("The sale of %(title)s (%(slug)s) is on again: buyers can reserve.")
            else:
                said = gettext("The sale of %(title)s (%(slug)s) was not paused.")
            messages.success(request, said % {"title": drop.display_title, "slug": drop.slug})
            if not result.drained:
                messages.warning(
                    request,
                    gettext(
                        "Some claims that began before the pause were still running after 3 s; "
                        "check the dashboard for holds created after the pause."
                    ),
                )
        return redirect(safe_next(request) or reverse("admin:shop_drop_dashboard"))

    def pause_view(self, request: HttpRequest, drop_id: int) -> HttpResponse:
        return self._switch(request, drop_id, pause=True)

    def resume_view(self, request: HttpRequest, drop_id: int) -> HttpResponse:
        return self._switch(request, drop_id, pause=False)

    @admin.action(description=_("Duplicate for the next sale (starts in a week)"), permissions=["add"])
    def duplicate_drops(self, request: HttpRequest, queryset: QuerySet[Drop]) -> None:
        for drop in queryset:
            try:
                copy = services.duplicate_drop(drop=drop)
            except FloodgateError as error:
                said = gettext("%(slug)s not duplicated: %(detail)s")
                messages.error(request, said % {"slug": drop.slug, "detail": error.detail})
                continue
            said = gettext("Created %(slug)s, starting %(starts)s.")
            messages.success(
                request,
                said % {"slug": copy.slug, "starts": formatting.shop_time(copy.starts_at, "Y-m-d H:i T")},
            )

    def has_rehearse_permission(self, request: HttpRequest) -> bool:
        # its own permission: a rehearsal aims a crowd at this shop (settings.REHEARSAL_MAX_BUYERS)
        return request.user.has_perm("shop.rehearse_drop")

    @admin.action(description=_("Rehearse this drop (a hidden copy)"), permissions=["rehearse"])
    def rehearse_drop(self, request: HttpRequest, queryset: QuerySet[Drop]) -> None:
        drops = list(queryset[:2])
        if len(drops) != 1:
            messages.error(request, gettext("Rehearse one drop at a time."))
            return
        try:
            buyers = rehearsal.parse_buyers(request.POST.get("buyers") or DEFAULT_REHEARSAL_BUYERS)
            started = rehearsal.start_rehearsal(drop=drops[0], buyers=buyers)
        except FloodgateError as error:
            messages.error(request, gettext("Not started: %(detail)s") % {"detail": error.detail})
            return
        messages.success(
            request,
            gettext(
                "Rehearsal of %(slug)s started with %(buyers)s buyers (process %(pid)s, log %(log)s); "
                "its report appears on the drop's page when it ends."
            )
            % {"slug": drops[0].slug, "buyers": buyers, "pid": started.pid, "log": started.log_path.name},
        )

    # the report is a page of its own with its own <style>, which no response nonce can reach
    @method_decorator(csp_replace({"style-src": [SELF, UNSAFE_INLINE]}))
    def rehearsal_view(
        self, request: HttpRequest, drop_id: int, report_id: int | None = None
    ) -> HttpResponse:
        drop = get_object_or_404(Drop, pk=drop_id)
        if not self.has_view_permission(request, drop):
            raise PermissionDenied
        report = rehearsal.report_of(drop=drop, report_id=report_id)
        if report is None:
            raise Http404(
                gettext("This drop has not been rehearsed yet.")
                if report_id is None
                else gettext("No such report.")
            )
        return HttpResponse(report.html, content_type="text/html; charset=utf-8")

    @admin.display(description=_("draw commitment"))
    def draw_commitment(self, drop: Drop) -> str:
        """What the waiting room committed to when it opened: never typed, never edited here."""
        queue = Queue.objects.filter(pk=drop.pk).first() if drop.pk else None
        if queue is None:
            return gettext(
                "the seed's hash and a drand round: named when the waiting room opens, an hour ahead"
            )
        chain = beacon.BY_HASH.get(queue.beacon_chain)
        if chain is None or queue.beacon_round is None:
            return format_html(
                gettext("seed sha256 <code>{}</code>; no beacon round (DRAW_BEACON off)"), queue.seed_sha256
            )
        fixed = (
            gettext("fixed: people have joined")
            if Ticket.objects.filter(drop_id=drop.pk).exists()
            else gettext("follows the start until the first join")
        )
        return format_html(
            gettext("seed sha256 <code>{}</code>; drand {} round <code>{}</code> (due {}), {}; {}"),
            queue.seed_sha256,
            chain.name,
            queue.beacon_round,
            formatting.shop_time(chain.time_of(queue.beacon_round), "Y-m-d H:i:s T"),
            queue.get_beacon_status_display(),
            fixed,
        )

    @admin.display(description=_("rehearsal reports"))
    def last_rehearsal(self, drop: Drop) -> str:
        reports = rehearsal.latest_reports(drop=drop) if drop.pk else []
        if not reports:
            return gettext("none yet (action: Rehearse this drop)")
        links = format_html_join(
            " · ",
            gettext('<a href="{}" target="_blank">{}, {} buyers</a>'),
            (
                (
                    reverse("admin:shop_drop_rehearsal_report", args=[drop.pk, report.pk]),
                    formatting.shop_time(report.made_at, "Y-m-d H:i T"),
                    report.buyers,
                )
                for report in reports
            ),
        )
        latest = reverse("admin:shop_drop_rehearsal", args=[drop.pk])
        return format_html(
            gettext('<a href="{}" target="_blank">latest report</a>; each kept: {}'), latest, links
        )

    def has_export_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("checkout.view_order")

    @admin.action(description=_("Export orders (CSV)"), permissions=["export"])
    def export_orders_csv(self, request: HttpRequest, queryset: QuerySet[Drop]) -> HttpResponse:
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="floodgate-orders.csv"'
        writer = csv.writer(response)
        writer.writerow(
            [
                "drop",
                "order",
                "buyer",
                "email",
                "quantity",
                "units",
                "amount",
                "currency",
                "state",
                "refunded",
                "created_at",
                "failure_reason",
                "refunded_units",
                "refunded_amount",
                "net",
                "tax",
                "tax_rate",
                "shipping_address",
                "variant",
                "shipping",
                "shipping_tax",
                "shipping_tax_rate",
                "discount_code",
                "discount",
            ]
        )
        writer.writerows(
            [spreadsheet_safe(cell) for cell in row]
            for row in checkout_selectors.export_rows(drop_ids=[d.pk for d in queryset])
        )
        return response

    @admin.display(description=_("drop"), ordering="slug")
    def drop_display(self, drop: Drop) -> str:
        return format_html("{}<br><small>{}</small>", drop.display_title, drop.slug)

    @admin.display(
        description=format_lazy(_("sale ({zone})"), zone=formatting.shop_zone_lazy()), ordering="starts_at"
    )
    def sale_window(self, drop: Drop) -> str:
        starts, ends = timezone.localtime(drop.starts_at), timezone.localtime(drop.ends_at)
        until = formatting.shop_time(ends, "H:i" if ends.date() == starts.date() else "Y-m-d H:i")
        return format_html(gettext("{}<br>to {}"), formatting.shop_time(starts), until)

    @admin.display(description=_("room"), boolean=True, ordering="waiting_room")
    def room_display(self, drop: Drop) -> bool:
        return drop.waiting_room

    @admin.display(description=_("left"))
    def stock_display(self, drop: Drop) -> str:
        """What is left to sell (held units are not), of the quantity; each size's under a drop in sizes."""
        variants: list[Variant] = getattr(drop, "variants_left", None) or []
        left = sum(inventory_selectors.variant_left(v) for v in variants)
        words = gettext("%(left)s of %(count)s left") % {
            "left": formatting.count(left),
            "count": formatting.count(drop.quantity),
        }
        if len(variants) < 2:
            return words
        sizes = format_html_join(
            " · ",
            '<span class="fg-size-left" data-variant="{}">{}: {}</span>',
            ((v.name, v.name, formatting.count(inventory_selectors.variant_left(v))) for v in variants),
        )
        return format_html("{}<br><small>{}</small>", words, sizes)

    @admin.display(description=_("sales"))
    def orders_link(self, drop: Drop) -> str:
        orders = reverse("admin:checkout_order_changelist") + f"?drop__id__exact={drop.pk}"
        chart = reverse("admin:shop_drop_sales", args=[drop.pk])
        return format_html(
            '<a href="{}">{}</a> · <a href="{}" class="fg-sales-link">{}</a>',
            orders,
            gettext("orders"),
            chart,
            gettext("chart"),
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Drop]:
        # each drop's variants with what is left of them, for the list's "left": one query a page
        left = Prefetch("variants", queryset=inventory_selectors.variants_left(), to_attr="variants_left")
        return super().get_queryset(request).prefetch_related(left)

    def get_readonly_fields(self, request: HttpRequest, obj: Drop | None = None) -> list[str]:
        fields = list(self.readonly_fields)
        if obj is not None and obj.state != DropState.SCHEDULED:
            fields += ["inventory_mode", "bucket_count"]
        if obj is not None and obj.variants.count() > 1:
            fields.append("quantity")  # the variants' sum: each variant's quantity changes below
        return fields

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, object] | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except Refused as refused:
            # The admin's transaction rolled back: the drop, its variants, its stock and the log
            # entry are as they were. The same post again shows the form with the refusal on it.
            setattr(request, REFUSED, refused.detail)
            return super().changeform_view(request, object_id, form_url, extra_context)

    def get_form(
        self, request: HttpRequest, obj: Drop | None = None, change: bool = False, **kwargs: Any
    ) -> type[forms.ModelForm]:
        form = super().get_form(request, obj, change, **kwargs)
        refused = getattr(request, REFUSED, None)
        if refused is None:
            return form
        return type(form.__name__, (form,), {"refused": refused})

    def save_model(self, request: HttpRequest, obj: Drop, form: forms.ModelForm, change: bool) -> None:
        """Nothing here: the drop is created or changed with its variants by one service call in
        save_related, when the variants' rows are known too."""

    def save_related(
        self, request: HttpRequest, form: forms.ModelForm, formsets: list[Any], change: bool
    ) -> None:
        """The form and the variants' rows become one service call, in the admin's transaction; a
        refusal (FloodgateError) rolls it all back and is shown on the form (changeform_view)."""
        found = next((fs.plan for fs in formsets if isinstance(fs, VariantFormSet)), None)
        plan = found or Plan(variants=[], relayout=False, quantities={}, prices={})  # no rows shown
        try:
            if change:
                self._change(form, plan)
            else:
                self._create(form, plan)
        except FloodgateError as error:
            said = gettext("Stock not changed: %(detail)s") if change else "%(detail)s"
            raise Refused(said % {"detail": error.detail}) from error

    def construct_change_message(
        self, request: HttpRequest, form: forms.Form, formsets: Iterable[BaseFormSet[Any]], add: bool = False
    ) -> list[dict[str, Any]]:
        """Django's message, the variants' rows as one more changed field (the services saved them)."""
        others = [fs for fs in formsets if not isinstance(fs, VariantFormSet)]
        message: list[dict[str, Any]] = super().construct_change_message(
            request,
            form,
            others,
            add,
        )
        plan = next((fs.plan for fs in formsets if isinstance(fs, VariantFormSet)), None)
        if not add and plan is not None and (plan.relayout or plan.quantities or plan.prices):
            message.append({"changed": {"fields": ["variants"]}})
        return message

    def _change(self, form: forms.ModelForm, plan: Plan) -> None:
        drop: Drop = form.instance
        columns = {f.name for f in Drop._meta.concrete_fields}
        # The kill switch's columns are never written from a stale form; the stock's move with it.
        fields = [f for f in form.changed_data if f in columns and f not in STOCK_FIELDS | PAUSE_FIELDS]
        data = form.cleaned_data
        services.change_drop(
            drop=drop,
            fields=fields,
            # only what the merchant changed: a stale form's other values are not typed wishes
            **{f: data[f] for f in STOCK_FIELDS if f in form.changed_data},
            variants=plan.variants if plan.relayout else None,
            quantities=plan.quantities,
            prices=plan.prices,
        )
        # The draw's round follows the start and the line's close while nobody has joined.
        if "starts_at" in fields or "line_close_seconds" in fields:
            transaction.on_commit(partial(drawing.recommit_beacon, drop=drop))

    def _create(self, form: forms.ModelForm, plan: Plan) -> None:
        data = form.cleaned_data
        product = data["product"]
        # Every field of the form, by name: one create_drop lacks fails loudly, never silently.
        fields = {name: data[name] for name in DropForm.Meta.fields if name != "product"}
        fields["quantity"] = form.instance.quantity  # typed, or the variants' sum
        drop = services.create_drop(
            product_sku=product.sku,
            product_name=product.name,
            price_minor=product.price_minor,
            currency=product.currency,
            unit_labels=data.get("labels"),
            variants=plan.variants or None,
            **fields,
        )
        # The admin goes on with the form's drop (log entry, redirect): make it the one just created.
        form.instance.pk = drop.pk
        form.instance.refresh_from_db()
