"""Merchants see orders per drop; the saga writes them, so the admin only reads, but for two
acts: a refund (whole or some units, from the order's page) and on-call recording a refused
capture or void it settled by hand at the provider."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.text import format_lazy
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from checkout import fulfilment, invoices, refunds, selectors, services, support
from checkout.carriers import CARRIERS
from checkout.models import Dispute, DisputeState, Invoice, Order, OutboxMessage, Payment, Refund
from core import formatting
from core.errors import FloodgateError
from core.text import storable
from shop.models import money

PAYMENT_FIELDS = ("provider", "session_id", "state", "amount_money", "last_error", "created_at")


def with_money(fields: list[str]) -> list[str]:
    """A model's fields as a merchant reads them: each `<x>_minor` as the display method `<x>_money`
    (money in the currency), the currency column dropped (the amounts carry it)."""
    return [
        f.removesuffix("_minor") + "_money" if f.endswith("_minor") else f for f in fields if f != "currency"
    ]


class PaymentInline(admin.TabularInline):
    model = Payment
    fields = PAYMENT_FIELDS
    readonly_fields = PAYMENT_FIELDS
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Order | None = None) -> bool:
        return False

    @admin.display(description=_("amount"))
    def amount_money(self, payment: Payment) -> str:
        return money(payment.amount_minor, payment.currency)


REFUND_FIELDS = (
    "quantity",
    "amount",
    "restock",
    "state",
    "reason",
    "requested_by",
    "last_error",
    "created_at",
)


class RefundInline(admin.TabularInline):
    model = Refund
    fields = REFUND_FIELDS
    readonly_fields = REFUND_FIELDS
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Order | None = None) -> bool:
        return False

    @admin.display(description=_("amount"))
    def amount(self, refund: Refund) -> str:
        return refund.amount_display


DISPUTE_FIELDS = ("state", "amount", "reason", "evidence_due_at", "opened_at", "closed_at", "dispute_id")


class DisputeInline(admin.TabularInline):
    model = Dispute
    fields = DISPUTE_FIELDS
    readonly_fields = DISPUTE_FIELDS
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Order | None = None) -> bool:
        return False

    @admin.display(description=_("amount"))
    def amount(self, dispute: Dispute) -> str:
        return dispute.amount_display


REFUND_WORDS = {
    "succeeded": _("refunded."),
    "pending": _("accepted by the provider, on its way to the buyer."),
    "requested": _("the provider did not answer yet; it is retried in the background."),
    "failed": _("the provider refused the refund (see the order's refunds for why)."),
}


SHIP_WORDS = {
    "shipped": _("Order %(number)s is marked shipped; the buyer is e-mailed the tracking number."),
    "corrected": _("Order %(number)s has its new tracking number; the buyer is e-mailed the correction."),
    "unchanged": _("Order %(number)s already had this tracking number; nothing was sent."),
}


class RefundForm(forms.Form):
    quantity = forms.IntegerField(min_value=1, label=_("Quantity"), help_text=_("Units to refund."))
    amount = forms.DecimalField(
        min_value=0,
        required=False,
        label=_("Amount"),
        help_text=_("In the order's currency; empty: these units' share of what was paid."),
    )
    restock = forms.BooleanField(required=False, label=_("Put the units back on sale"))
    reason = forms.CharField(
        max_length=refunds.REASON_MAX, required=False, label=_("Reason"), help_text=_("Shown to the buyer.")
    )


class ShipForm(forms.Form):
    carrier = forms.ChoiceField(label=_("Carrier"), choices=())
    tracking_number = forms.CharField(
        max_length=60, label=_("Tracking number"), help_text=_("As the carrier printed it.")
    )

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["carrier"].choices = [(code, c.name) for code, c in CARRIERS.items()]  # type: ignore[attr-defined]


class TrackingUploadForm(forms.Form):
    file = forms.FileField(
        label=_("CSV file"),
        help_text=_(
            'A header line "order,carrier,tracking_number", then one order a line, e.g. '
            '"1042,dhl,00340434161094042557". Carriers: %(codes)s.'
        )
        % {"codes": ", ".join(CARRIERS)},
    )


class CancelForm(forms.Form):
    reason = forms.CharField(
        max_length=refunds.REASON_MAX,
        label=_("Reason"),
        help_text=_('Shown to the buyer in the e-mail, e.g. "The size was mislabelled; we are sorry."'),
        widget=forms.Textarea(attrs={"rows": 3}),
    )


class ShippedFilter(admin.SimpleListFilter):
    title = _("shipping")
    parameter_name = "shipping"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Order]) -> list[tuple[str, str]]:
        return [("to_ship", gettext("to ship")), ("shipped", gettext("shipped"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Order]) -> QuerySet[Order]:
        if self.value() == "to_ship":
            return queryset.filter(state="confirmed", shipped_at__isnull=True, shipping_address__isnull=False)
        if self.value() == "shipped":
            return queryset.filter(shipped_at__isnull=False)
        return queryset


class RefundsFilter(admin.SimpleListFilter):
    """Orders with a refund (whole or some units), or none: the home's "Refunds" link."""

    title = _("refunds")
    parameter_name = "refunds"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Order]) -> list[tuple[str, str]]:
        return [("some", gettext("some refunded")), ("none", gettext("none refunded"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Order]) -> QuerySet[Order]:
        if self.value() == "some":
            return queryset.filter(refunded_quantity__gt=0)
        if self.value() == "none":
            return queryset.filter(refunded_quantity=0)
        return queryset


class VariantFilter(admin.SimpleListFilter):
    """Orders of one variant by name ("M"): with the drop filter, that drop's variants only."""

    title = _("variant")
    parameter_name = "variant"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin[Order]) -> list[tuple[str, str]]:
        drop = request.GET.get("drop__id__exact", "")
        # garbage (or a number past bigint) in the address is no drop: every drop's names
        drop_id = int(drop) if drop.isascii() and drop.isdigit() and len(drop) < 19 else None
        names = selectors.variant_names(drop_id=drop_id)
        return [(name, name) for name in names]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Order]) -> QuerySet[Order]:
        name = self.value()
        if not name:
            return queryset
        # a name no variant can have (NUL, bad Unicode) matches none, not a database error
        return queryset.filter(hold__variant__name=name) if storable(name) else queryset.none()


class InvoicePeriodForm(forms.Form):
    since = forms.DateField(label=_("From"), widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(label=_("To (included)"), widget=forms.DateInput(attrs={"type": "date"}))

    def clean(self) -> dict[str, object]:
        cleaned = super().clean() or {}
        since, until = cleaned.get("since"), cleaned.get("until")
        if since is not None and until is not None and until < since:
            raise forms.ValidationError(_("The period ends before it starts."))
        return cleaned


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    # Narrow columns, so the list fits a 1280 px screen between the admin's sidebar and its filters;
    # "payment voided" is a filter (rare), not a column.
    list_display = ["id", "drop", "buyer", "bought", "state", "refunds", "dispute", "made"]
    list_filter = ["state", ShippedFilter, RefundsFilter, "refunded", "drop", VariantFilter]
    actions = ["shipping_list_csv", "resend_confirmation", "invoices_zip"]
    # Support finds an order by whatever the buyer quotes: the number, their e-mail, name or address,
    # or an invoice's number (get_search_results).
    search_fields = [
        "=id",
        "buyer__username",
        "buyer__email",
        "buyer__first_name",
        "buyer__last_name",
        "shipping_address__name",
        "shipping_address__line1",
        "shipping_address__postal_code",
        "shipping_address__city",
        "tracking_number",
        "drop__slug",
    ]
    list_select_related = ["drop", "buyer", "hold__variant"]
    readonly_fields = [*with_money([f.name for f in Order._meta.fields]), "variant"]
    fields = tuple(readonly_fields)  # named, or Django would add the *_minor columns as inputs
    inlines = [PaymentInline, RefundInline, DisputeInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Order]:
        return super().get_queryset(request).prefetch_related("disputes")  # the column: one query

    @admin.display(description=_("dispute"))
    def dispute(self, order: Order) -> str:
        """The latest dispute's state, with its evidence deadline (the shop's day) while evidence is
        due; "-": none."""
        latest = max(order.disputes.all(), key=lambda d: d.opened_at, default=None)
        if latest is None:
            return "-"
        if latest.evidence_due_at is not None and latest.state == DisputeState.NEEDS_RESPONSE:
            return gettext("Needs a response by %(due)s") % {
                "due": formatting.shop_time(latest.evidence_due_at, "Y-m-d")
            }
        return str(latest.get_state_display())

    change_form_template = "admin/checkout/order/change_form.html"

    @admin.display(description=_("bought"), ordering="amount_minor")
    def bought(self, order: Order) -> str:
        """ "2 units of M, €258.00": the size inside the column, so the list still fits 1280 px."""
        size = selectors.variant_name(order)
        words = {"units": formatting.units(order.quantity), "variant": size, "amount": order.amount_display}
        if size:
            return gettext("%(units)s of %(variant)s, %(amount)s") % words
        return gettext("%(units)s, %(amount)s") % words

    @admin.display(description=_("amount"))
    def amount_money(self, order: Order) -> str:
        return order.amount_display

    @admin.display(description=_("tax"))
    def tax_money(self, order: Order) -> str:
        return money(order.tax_minor, order.currency)

    @admin.display(description=_("net"))
    def net_money(self, order: Order) -> str:
        return money(order.amount_minor - order.tax_minor, order.currency)

    @admin.display(description=_("refunded amount"))
    def refunded_money(self, order: Order) -> str:
        return money(order.refunded_minor, order.currency)

    @admin.display(description=_("shipping fee"))
    def shipping_money(self, order: Order) -> str:
        return money(order.shipping_minor, order.currency)

    @admin.display(description=_("shipping fee's tax"))
    def shipping_tax_money(self, order: Order) -> str:
        return money(order.shipping_tax_minor, order.currency)

    @admin.display(description=_("discount"))
    def discount_money(self, order: Order) -> str:
        return money(order.discount_minor, order.currency)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Order], search_term: str
    ) -> tuple[QuerySet[Order], bool]:
        """The fields above, and an invoice or credit note number as printed (INV-000042, crn-7)."""
        found, duplicates = super().get_search_results(request, queryset, search_term)
        by_invoice = support.orders_by_invoice_number(search_term)
        if by_invoice:
            found = found | queryset.filter(pk__in=by_invoice)
        return found, duplicates

    @admin.display(description=_("refunded"), ordering="refunded_quantity")
    def refunds(self, order: Order) -> str:
        if not order.refunded_quantity:
            return gettext("none")
        return f"{formatting.units(order.refunded_quantity)}, {money(order.refunded_minor, order.currency)}"

    @admin.display(
        description=format_lazy(_("made ({zone})"), zone=formatting.shop_zone_lazy()), ordering="created_at"
    )
    def made(self, order: Order) -> str:
        return formatting.shop_time(order.created_at)

    @admin.display(description=_("variant"), ordering="hold__variant__name")
    def variant(self, order: Order) -> str:
        return selectors.variant_name(order) or "-"

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("<int:order_id>/refund/", view(self.refund_view), name="checkout_order_refund"),
            path("<int:order_id>/ship/", view(self.ship_view), name="checkout_order_ship"),
            path("<int:order_id>/cancel/", view(self.cancel_view), name="checkout_order_cancel"),
            path("buyer/<int:buyer_id>/", view(self.buyer_view), name="checkout_order_buyer"),
            path("ship/", view(self.upload_tracking_view), name="checkout_order_upload_tracking"),
            path(
                "<int:order_id>/invoices/<int:invoice_id>.pdf",
                view(self.invoice_view),
                name="checkout_order_invoice",
            ),
            path("invoices/", view(self.export_invoices_view), name="checkout_order_export_invoices"),
            *super().get_urls(),
        ]

    def has_ship_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("checkout.ship_order")

    @admin.action(description=_("Shipping list for a carrier (CSV)"), permissions=["view"])
    def shipping_list_csv(self, request: HttpRequest, queryset: QuerySet[Order]) -> HttpResponse:
        """The selected orders still to ship, one address field a column, for a carrier's import."""
        chosen = queryset.select_related("shipping_address", "buyer", "drop__product", "hold__variant")
        response = HttpResponse(fulfilment.shipping_list(chosen.order_by("pk")), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="shipping-list.csv"'
        return response

    def ship_view(self, request: HttpRequest, order_id: int) -> HttpResponse:
        """One order handed to a carrier: the buyer is e-mailed the tracking number."""
        if not self.has_ship_permission(request):
            raise PermissionDenied
        order = get_object_or_404(Order, pk=order_id)
        initial = {"carrier": order.carrier or "dhl", "tracking_number": order.tracking_number}
        form = ShipForm(request.POST or None, initial=initial)
        if request.method == "POST" and form.is_valid():
            try:
                done = fulfilment.mark_shipped(
                    order_id=order.pk,
                    carrier=form.cleaned_data["carrier"],
                    tracking_number=form.cleaned_data["tracking_number"],
                )
            except FloodgateError as error:
                form.add_error("tracking_number" if error.code == "invalid" else None, error.detail)
            else:
                order.refresh_from_db()
                if done != "unchanged":
                    self.log_change(request, order, f"Shipped: {order.carrier} {order.tracking_number}.")
                self.message_user(request, SHIP_WORDS[done] % {"number": order.pk}, messages.SUCCESS)
                return redirect(reverse("admin:checkout_order_change", args=[order.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Ship order %(order)s") % {"order": order.pk},
            "order": order,
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/checkout/order/ship.html", context)

    @admin.action(description=_("Send the confirmation e-mail again"), permissions=["view"])
    def resend_confirmation(self, request: HttpRequest, queryset: QuerySet[Order]) -> None:
        sent, refused = 0, []
        for order in queryset.order_by("pk"):
            try:
                support.resend_confirmation(order_id=order.pk)
            except FloodgateError as error:
                refused.append(str(error.detail))
            else:
                self.log_change(request, order, "Confirmation e-mail sent again.")
                sent += 1
        if sent:
            words = ngettext(
                "%(count)s confirmation e-mail is on its way again.",
                "%(count)s confirmation e-mails are on their way again.",
                sent,
            )
            self.message_user(request, words % {"count": sent}, messages.SUCCESS)
        for why in refused:
            self.message_user(request, why, messages.WARNING)

    def buyer_view(self, request: HttpRequest, buyer_id: int) -> HttpResponse:
        """One buyer's holds, orders, refunds, e-mails and queue tickets, for support."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            history = support.buyer_history(buyer_id=buyer_id)
        except FloodgateError as error:
            raise Http404(error.detail) from None
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Buyer %(name)s") % {"name": history.buyer.get_username()},
            "history": history,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/checkout/order/buyer.html", context)

    def cancel_view(self, request: HttpRequest, order_id: int) -> HttpResponse:
        """The shop's cancel of an order whose money is not taken: the authorisation voided, the
        units back on sale, the buyer e-mailed the reason. Refunding staff may do it."""
        if not request.user.has_perm("checkout.refund_order"):
            raise PermissionDenied
        order = get_object_or_404(Order, pk=order_id)
        form = CancelForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            try:
                refunds.cancel_order(order_id=order.pk, buyer_id=None, reason=form.cleaned_data["reason"])
            except FloodgateError as error:
                form.add_error(None, error.detail)
            else:
                self.log_change(request, order, f"Cancelled by the shop: {form.cleaned_data['reason']}")
                self.message_user(
                    request,
                    gettext("Order %(number)s is cancelled; the buyer is not charged and is e-mailed.")
                    % {"number": order.pk},
                    messages.SUCCESS,
                )
                return redirect(reverse("admin:checkout_order_change", args=[order.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Cancel order %(order)s") % {"order": order.pk},
            "order": order,
            "form": form,
            "cancellable": selectors.cancellable(order),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/checkout/order/cancel.html", context)

    def render_change_form(
        self, request: HttpRequest, context: dict, *args: object, **kwargs: object
    ) -> HttpResponse:
        order = context.get("original")
        context["cancellable"] = order is not None and selectors.cancellable(order)
        context["invoices"] = invoices.of_order(order.pk) if order is not None else []
        return super().render_change_form(request, context, *args, **kwargs)  # type: ignore[arg-type]

    def invoice_view(self, request: HttpRequest, order_id: int, invoice_id: int) -> HttpResponse:
        """One invoice or credit note of the order, as PDF in the admin's language."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        found = Invoice.objects.filter(pk=invoice_id, order_id=order_id).first()
        if found is None:
            raise Http404(gettext("This order has no such invoice."))
        return invoices.pdf_response(found)

    @admin.action(description=_("Invoices and credit notes (CSV and PDFs in a ZIP)"), permissions=["view"])
    def invoices_zip(self, request: HttpRequest, queryset: QuerySet[Order]) -> HttpResponse | None:
        """The selected orders' invoices and credit notes for the accountant."""
        return self._zip(request, invoices.for_orders(queryset), "invoices.zip")

    def _zip(self, request: HttpRequest, chosen: QuerySet[Invoice], name: str) -> HttpResponse | None:
        if not chosen.exists():
            self.message_user(request, gettext("There is no invoice to export there."), messages.WARNING)
            return None
        try:
            content = invoices.export_zip(chosen)
        except invoices.TooMany:
            self.message_user(
                request,
                gettext("More than %(max)s invoices: export a shorter period or fewer orders.")
                % {"max": invoices.EXPORT_MAX},
                messages.ERROR,
            )
            return None
        response = HttpResponse(content, content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response

    def export_invoices_view(self, request: HttpRequest) -> HttpResponse:
        """A period's invoices and credit notes, by the day they were issued (the shop's days)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        form = InvoicePeriodForm(request.GET or None)
        if form.is_valid():
            since, until = form.cleaned_data["since"], form.cleaned_data["until"]
            answer = self._zip(
                request, invoices.in_period(since=since, until=until), f"invoices-{since}-{until}.zip"
            )
            if answer is not None:
                return answer
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Export a period's invoices"),
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/checkout/order/export_invoices.html", context)

    def upload_tracking_view(self, request: HttpRequest) -> HttpResponse:
        """Many orders shipped from one CSV: each good line applied, each bad one reported by number."""
        if not self.has_ship_permission(request):
            raise PermissionDenied
        form = TrackingUploadForm(request.POST or None, request.FILES or None)
        upload = None
        if request.method == "POST" and form.is_valid():
            try:
                upload = fulfilment.ship_from_csv(
                    form.cleaned_data["file"].read(fulfilment.MAX_UPLOAD_BYTES + 1)
                )
            except FloodgateError as error:
                form.add_error("file", error.detail)
            else:
                for order in Order.objects.filter(pk__in=upload.shipped):
                    self.log_change(
                        request, order, f"Shipped from a file: {order.carrier} {order.tracking_number}."
                    )
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Upload tracking numbers"),
            "form": form,
            "upload": upload,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/checkout/order/upload_tracking.html", context)

    def refund_view(self, request: HttpRequest, order_id: int) -> HttpResponse:
        """A refund form: the provider is asked on submit, and the answer shown on the order's page."""
        if not request.user.has_perm("checkout.refund_order"):
            raise PermissionDenied
        order = get_object_or_404(Order, pk=order_id)
        left = order.quantity - order.refunded_quantity
        form = RefundForm(request.POST or None, initial={"quantity": left, "restock": True})
        if request.method == "POST" and form.is_valid():
            amount = form.cleaned_data["amount"]
            try:
                amount_minor = None if amount is None else formatting.minor_units(amount, order.currency)
                asked = refunds.request_refund(
                    order_id=order.pk,
                    quantity=form.cleaned_data["quantity"],
                    amount_minor=amount_minor,
                    restock=form.cleaned_data["restock"],
                    reason=form.cleaned_data["reason"],
                    by=request.user.pk,
                )
            except ValueError as error:
                form.add_error("amount", str(error))
            except FloodgateError as error:
                form.add_error(None, error.detail)
            else:
                refund = refunds.send_now_or_later(asked.refund)
                self.log_change(
                    request, order, f"Refund {refund.pk}: {refund.amount_display}, {refund.state}."
                )
                self.message_user(
                    request,
                    f"{refund.amount_display}: {REFUND_WORDS[refund.state]}",  # the words are gettext_lazy
                    messages.ERROR if refund.state == "failed" else messages.SUCCESS,
                )
                return redirect(reverse("admin:checkout_order_change", args=[order.pk]))
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Refund order %(order)s") % {"order": order.pk},
            "order": order,
            "form": form,
            "left": left,
            "left_money": money(order.amount_minor - order.refunded_minor, order.currency),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/checkout/order/refund.html", context)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Order | None = None) -> bool:
        return False


@admin.register(Dispute)
class DisputeAdmin(admin.ModelAdmin):
    """Disputes as the provider reported them; they are answered at the provider, so nothing changes here."""

    list_display = [
        "id",
        "order",
        "state",
        "amount_money",
        "reason",
        "evidence_due_at",
        "opened_at",
        "closed_at",
    ]
    list_filter = ["state", "provider"]
    search_fields = ["dispute_id", "order__id"]
    list_select_related = ["order"]
    readonly_fields = with_money([f.name for f in Dispute._meta.fields])
    fields = tuple(readonly_fields)

    @admin.display(description=_("amount"), ordering="amount_minor")
    def amount_money(self, dispute: Dispute) -> str:
        return dispute.amount_display

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Dispute | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Dispute | None = None) -> bool:
        return False


@admin.register(OutboxMessage)
class OutboxMessageAdmin(admin.ModelAdmin):
    list_display = ["id", "topic", "key", "sent_at", "attempts", "next_attempt_at", "last_error"]
    list_filter = ["topic", ("sent_at", admin.EmptyFieldListFilter)]
    readonly_fields = [f.name for f in OutboxMessage._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Payment)
class PaymentAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "order",
        "provider",
        "session_id",
        "state",
        "amount_money",
        "last_error",
        "updated_at",
    ]
    list_filter = ["state", "provider"]
    search_fields = ["session_id", "reference", "order__id"]
    readonly_fields = with_money([f.name for f in Payment._meta.fields])
    fields = tuple(readonly_fields)
    actions = ["settled_at_the_provider"]

    @admin.display(description=_("amount"), ordering="amount_minor")
    def amount_money(self, payment: Payment) -> str:
        return money(payment.amount_minor, payment.currency)

    def has_settle_permission(self, request: HttpRequest) -> bool:
        # its own permission: viewing payments is not settling them (it clears an alert)
        return request.user.has_perm("checkout.settle_payment")

    @admin.action(
        description=_("Settled by hand at the provider (captured or voided there)"), permissions=["settle"]
    )
    def settled_at_the_provider(self, request: HttpRequest, queryset: QuerySet[Payment]) -> None:
        """On-call settled a refused capture or void at the provider: record it, and the alert clears."""
        settled = services.settled_by_hand(payment_ids=list(queryset.values_list("pk", flat=True)))
        for payment in settled:
            self.log_change(request, payment, f"Marked {payment.state} by hand (settled at the provider).")
        skipped = queryset.count() - len(settled)
        message = ngettext(
            "%(count)s payment marked settled.", "%(count)s payments marked settled.", len(settled)
        ) % {"count": len(settled)}
        if skipped:
            message += " " + ngettext(
                "%(count)s skipped: only capture_failed and void_failed payments need this.",
                "%(count)s skipped: only capture_failed and void_failed payments need this.",
                skipped,
            ) % {"count": skipped}
        self.message_user(request, message, messages.SUCCESS if settled else messages.WARNING)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Payment | None = None) -> bool:
        return False
