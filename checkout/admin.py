"""Merchants see orders per drop; the saga writes them, so the admin only reads."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from checkout.models import Order, OutboxMessage, Payment


class PaymentInline(admin.TabularInline):
    model = Payment
    fields = ["provider", "session_id", "state", "amount_minor", "currency", "last_error", "created_at"]
    readonly_fields = fields
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Payment | None = None) -> bool:
        return False
