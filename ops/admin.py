"""The merchant side in the Django admin, one module per model's admin: products (product_admin),
drops (drop_admin) and discount codes' add page (discount_admin); the small ones are here."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from fairness.models import Report
from holds.models import DiscountCode
from ops import discount_admin
from ops import drop_admin as drop_admin  # registers DropAdmin
from ops import product_admin as product_admin  # registers ProductAdmin
from shop.models import (
    ApiToken,
    PauseEvent,
)


@admin.register(DiscountCode)
class DiscountCodeAdmin(admin.ModelAdmin):
    """Codes are made in bulk (the add page makes N) and never edited: a code's terms are what its
    holds were priced by. Uses are counted by the claims alone."""

    list_display = [
        "code",
        "drop",
        "percent",
        "amount_minor",
        "currency",
        "uses",
        "max_uses",
        "starts_at",
        "ends_at",
    ]
    list_filter = ["drop"]
    search_fields = ["code"]
    readonly_fields = [
        "code",
        "drop",
        "percent",
        "amount_minor",
        "currency",
        "max_uses",
        "uses",
        "starts_at",
        "ends_at",
        "created_at",
    ]

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: Any = None) -> HttpResponse:
        return discount_admin.add_view(self, request)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "created_at"]
    search_fields = ["user__username"]
    readonly_fields = ["user", "digest", "created_at"]


@admin.register(PauseEvent)
class PauseEventAdmin(admin.ModelAdmin):
    list_display = ["at", "drop", "action", "actor", "reason"]
    list_filter = ["action", "drop"]
    readonly_fields = ["drop", "action", "actor", "reason", "at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(Report)
class ReportAdmin(admin.ModelAdmin):
    """A drop's public report: published by the shop when the drop is over. The merchant adds a
    note; the figures and the outcomes committed to stay as published."""

    list_display = ["drop", "published_at", "root"]
    readonly_fields = ["drop", "published_at", "root", "size", "figures"]
    fields = ["drop", "published_at", "note", "root", "size", "figures"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # published is published: a buyer's proof must keep its root
