"""Merchants see orders per drop; the saga writes them, so the admin only reads, but for two
acts: a refund (whole or some units, from the order's page) and on-call recording a refused
capture or void it settled by hand at the provider."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from checkout import refunds, selectors, services
from checkout.models import Dispute, DisputeState, Order, OutboxMessage, Payment, Refund
from core import formatting
from core.errors import FloodgateError
from core.text import storable
from shop.models import money

PAYMENT_FIELDS = ("provider", "session_id", "state", "amount_minor", "currency", "last_error", "created_at")


class PaymentInline(admin.TabularInline):
    model = Payment
    fields = PAYMENT_FIELDS
    readonly_fields = PAYMENT_FIELDS
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Order | None = None) -> bool:
        return False


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


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    # Narrow columns, so the list fits a 1280 px screen between the admin's sidebar and its filters;
    # "payment voided" is a filter (rare), not a column.
    list_display = ["id", "drop", "buyer", "bought", "state", "refunds", "dispute", "made"]
    list_filter = ["state", "refunded", "drop", VariantFilter]
    search_fields = ["buyer__username", "drop__slug", "id"]
    list_select_related = ["drop", "buyer", "hold__variant"]
    readonly_fields = [*(f.name for f in Order._meta.fields), "variant"]
    inlines = [PaymentInline, RefundInline, DisputeInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Order]:
        return super().get_queryset(request).prefetch_related("disputes")  # the column: one query

    @admin.display(description=_("dispute"))
    def dispute(self, order: Order) -> str:
        """The latest dispute's state, with its evidence deadline (UTC) while evidence is due; "-": none."""
        latest = max(order.disputes.all(), key=lambda d: d.opened_at, default=None)
        if latest is None:
            return "-"
        if latest.evidence_due_at is not None and latest.state == DisputeState.NEEDS_RESPONSE:
            return gettext("Needs a response by %(due)s") % {"due": f"{latest.evidence_due_at:%Y-%m-%d}"}
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

    @admin.display(description=_("refunded"), ordering="refunded_quantity")
    def refunds(self, order: Order) -> str:
        if not order.refunded_quantity:
            return gettext("none")
        return f"{formatting.units(order.refunded_quantity)}, {money(order.refunded_minor, order.currency)}"

    @admin.display(description=_("made (UTC)"), ordering="created_at")
    def made(self, order: Order) -> str:
        return f"{order.created_at:%Y-%m-%d %H:%M}"

    @admin.display(description=_("variant"), ordering="hold__variant__name")
    def variant(self, order: Order) -> str:
        return selectors.variant_name(order) or "-"

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.refund_view)
        return [path("<int:order_id>/refund/", view, name="checkout_order_refund"), *super().get_urls()]

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

    list_display = ["id", "order", "state", "amount", "reason", "evidence_due_at", "opened_at", "closed_at"]
    list_filter = ["state", "provider"]
    search_fields = ["dispute_id", "order__id"]
    list_select_related = ["order"]
    readonly_fields = [f.name for f in Dispute._meta.fields]

    @admin.display(description=_("amount"), ordering="amount_minor")
    def amount(self, dispute: Dispute) -> str:
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
        "amount_minor",
        "currency",
        "last_error",
        "updated_at",
    ]
    list_filter = ["state", "provider"]
    search_fields = ["session_id", "reference", "order__id"]
    readonly_fields = [f.name for f in Payment._meta.fields]
    actions = ["settled_at_the_provider"]

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
