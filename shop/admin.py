"""The merchant side: products and drops in the Django admin."""

from __future__ import annotations

from functools import partial

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest

from inventory import services as inventory
from shop.errors import FloodgateError
from shop.models import ApiToken, Drop, DropState, Product

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
        if obj is not None and obj.state != DropState.SCHEDULED:
            return [*self.readonly_fields, "inventory_mode", "bucket_count"]
        return list(self.readonly_fields)

    def save_model(self, request: HttpRequest, obj: Drop, form: forms.ModelForm, change: bool) -> None:
        """New drop: stock rows with it. Changed drop: stock moves with quantity and layout."""
        if not change:
            with transaction.atomic():
                super().save_model(request, obj, form, change)
                inventory.configure_stock(drop=obj)
            return
        # Quantity and layout move only together with their stock rows, in the services.
        wanted = {f: getattr(obj, f) for f in ("quantity", "inventory_mode", "bucket_count")}
        for field in wanted:
            setattr(obj, field, form.initial[field])
        super().save_model(request, obj, form, change)
        # The admin view runs in a transaction; stock services own theirs, so they run after it.
        transaction.on_commit(partial(self._move_stock, request, obj, **wanted))

    def _move_stock(
        self, request: HttpRequest, drop: Drop, *, quantity: int, inventory_mode: str, bucket_count: int
    ) -> None:
        try:
            if (inventory_mode, bucket_count) != (drop.inventory_mode, drop.bucket_count):
                inventory.relayout_stock(drop=drop, inventory_mode=inventory_mode, bucket_count=bucket_count)
            if quantity != drop.quantity:
                inventory.change_quantity(drop=drop, quantity=quantity)
        except FloodgateError as error:
            messages.error(request, f"Stock not changed: {error.detail}")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "created_at"]
    search_fields = ["user__username"]
    readonly_fields = ["user", "digest", "created_at"]
