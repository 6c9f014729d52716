"""The admin's site: its home shows what a merchant runs (drops, orders, refunds, the dashboard,
the sales pages) and, under a heading of its own, the plumbing, each part to who may see it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from shop.models import Drop

# What runs the shop rather than sells in it: whole apps (sign-in throttling, staff accounts,
# e-mail addresses, task results) and the plumbing models of ours. Everything else is the shop's.
PLUMBING_APPS = {
    "auth",
    "axes",
    "account",
    "socialaccount",
    "sites",
    "django_celery_results",
    "django_celery_beat",
}
PLUMBING_MODELS = {"checkout.outboxmessage", "checkout.payment", "shop.pauseevent", "shop.apitoken"}
SALES_PAGES = 6  # the latest drops' sales pages linked from the home
# What a merchant opens most, first; the shop's other models after these, in Django's order.
SHOP_FIRST = ["shop.drop", "checkout.order", "shop.product", "checkout.dispute"]


@dataclass(frozen=True)
class Link:
    name: str
    url: str
    id: str


def is_plumbing(app_label: str, label_lower: str) -> bool:
    return app_label in PLUMBING_APPS or label_lower in PLUMBING_MODELS


def first_in(label_lower: str) -> int:
    return SHOP_FIRST.index(label_lower) if label_lower in SHOP_FIRST else len(SHOP_FIRST)


class ShopAdminSite(admin.AdminSite):
    site_header = "Floodgate"
    site_title = _("Floodgate admin")
    index_title = _("Your shop")
    index_template = "admin/floodgate_index.html"

    def index(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> TemplateResponse:
        """Django's home, its apps split in two: the shop's models and links first, the plumbing after."""
        shop: list[dict[str, Any]] = []
        plumbing: list[dict[str, Any]] = []
        for app in self.get_app_list(request):
            theirs = [
                m for m in app["models"] if not is_plumbing(app["app_label"], m["model"]._meta.label_lower)
            ]
            rest = [m for m in app["models"] if m not in theirs]
            shop += theirs
            if rest:
                plumbing.append({**app, "models": rest})
        shop.sort(key=lambda m: first_in(m["model"]._meta.label_lower))
        context = {
            "shop_models": shop,
            "shop_links": self.shop_links(request),
            "plumbing_apps": plumbing,
            **(extra_context or {}),
        }
        return super().index(request, context)

    def shop_links(self, request: HttpRequest) -> list[Link]:
        """The merchant's pages that are not a model's list: refunds, the dashboard, the sales pages."""
        user = request.user
        links = []
        if user.has_perm("checkout.view_order"):
            url = reverse("admin:checkout_order_changelist") + "?refunds=some"
            links.append(Link(gettext("Refunds"), url, "home-refunds"))
        if user.has_perm("shop.view_drop") or user.has_perm("shop.pause_drop"):
            links.append(Link(gettext("Dashboard"), reverse("admin:shop_drop_dashboard"), "home-dashboard"))
        if user.has_perm("shop.view_drop"):
            started = Drop.objects.filter(starts_at__lte=timezone.now()).select_related("product")
            for drop in started.order_by("-starts_at")[:SALES_PAGES]:  # a drop yet to start sold nothing
                name = gettext("Sales of %(drop)s") % {"drop": drop.display_title}
                links.append(
                    Link(name, reverse("admin:shop_drop_sales", args=[drop.pk]), f"home-sales-{drop.pk}")
                )
        return links
