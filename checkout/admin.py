"""Merchants see orders per drop; the saga writes them, so the admin only reads (and on-call
records a refused capture or void it settled by hand at the provider)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from checkout import services
from checkout.models import Order, OutboxMessage, Payment

PAYMENT_FIELDS = ("provider", "session_id", "state", "amount_minor", "currency", "last_error", "created_at")


class PaymentInline(admin.TabularInline):
    model = Payment
    fields = PAYMENT_FIELDS
    readonly_fields = PAYMENT_FIELDS
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Order | None = None) -> bool:
        return False


@admin.register(Order)
class OrderAdmin(admin.ModelAdmin):
    list_display = ["id", "drop", "buyer", "quantity", "amount_display", "state", "refunded", "created_at"]
    list_filter = ["state", "refunded", "drop"]
    search_fields = ["buyer__username", "drop__slug", "id"]
    list_select_related = ["drop", "buyer"]
    readonly_fields = [f.name for f in Order._meta.fields]
    inlines = [PaymentInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Order | None = None) -> bool:
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

    @admin.action(description="Settled by hand at the provider (captured or voided there)")
    def settled_at_the_provider(self, request: HttpRequest, queryset: QuerySet[Payment]) -> None:
        """On-call settled a refused capture or void at the provider: record it, and the alert clears."""
        settled = services.settled_by_hand(payment_ids=list(queryset.values_list("pk", flat=True)))
        for payment in settled:
            self.log_change(request, payment, f"Marked {payment.state} by hand (settled at the provider).")
        skipped = queryset.count() - len(settled)
        message = f"{len(settled)} payment(s) marked settled."
        if skipped:
            message += f" {skipped} skipped: only capture_failed and void_failed payments need this."
        self.message_user(request, message, messages.SUCCESS if settled else messages.WARNING)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Payment | None = None) -> bool:
        return False
