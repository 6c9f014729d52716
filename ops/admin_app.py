"""django.contrib.admin with the shop's own site (ops.site) as admin.site: INSTALLED_APPS names
this config, which is imported before any model is, so the site is named, not imported."""

from __future__ import annotations

from django.contrib.admin.apps import AdminConfig


class ShopAdminConfig(AdminConfig):
    default_site = "ops.site.ShopAdminSite"
