"""The merchant side: products and drops in the Django admin."""

from __future__ import annotations

from django.contrib import admin
from django.db import transaction
from django.http import HttpRequest

from inventory import services as inventory
from shop.models import ApiToken, Drop, Product

admin.site.site_header = "Floodgate"
admin.site.site_title = "Floodgate admin"
admin.site.index_title = "Drops and products"


@admin.register(Product)
class ProductAdmin(admin.ModelAdmin):
    list_display = ["name", "sku", "price_display", "currency"]
    search_fields = ["name", "sku"]
    list_filter = ["currency"]


@admin.register(Drop)
class DropAdmin(admin.ModelAdmin):
    list_display = [
        "slug",
        "product",
        "quantity",
        "state_display",
        "starts_at",
        "ends_at",
        "inventory_mode",
        "bucket_count",
        "waiting_room",
    ]
    list_filter = ["paused", "inventory_mode", "waiting_room", "starts_at"]
    search_fields = ["slug", "title", "product__name", "product__sku"]
    date_hierarchy = "starts_at"
    list_select_related = ["product"]
    autocomplete_fields = ["product"]
    readonly_fields = ["paused", "paused_at", "paused_by", "pause_reason", "created_at"]
    fieldsets = [
        (None, {"fields": ["product", "slug", "title"]}),
        ("When", {"fields": ["starts_at", "ends_at"]}),
        ("Stock", {"fields": ["quantity", "inventory_mode", "bucket_count"]}),
        ("Buyers", {"fields": ["hold_seconds", "per_buyer_limit", "waiting_room", "admission_wave_seconds"]}),
        ("Kill switch", {"fields": ["paused", "paused_at", "paused_by", "pause_reason"]}),
    ]

    @admin.display(description="state")
    def state_display(self, drop: Drop) -> str:
        return drop.state.label

    def get_readonly_fields(self, request: HttpRequest, obj: Drop | None = None) -> list[str]:
        # Stock layout is fixed once the rows exist.
        fixed = ["quantity", "inventory_mode", "bucket_count"] if obj is not None else []
        return [*self.readonly_fields, *fixed]

    def save_model(self, request: HttpRequest, obj: Drop, form: object, change: bool) -> None:
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            if not change:
                inventory.configure_stock(drop=obj)


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "created_at"]
    search_fields = ["user__username"]
    readonly_fields = ["user", "digest", "created_at"]
