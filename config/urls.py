from __future__ import annotations

from django.contrib import admin
from django.urls import include, path, re_path

from admission import api as admission_api
from admission import views as admission_views
from checkout import api as checkout_api
from checkout import views as checkout_views
from config import api_views
from holds import api as holds_api
from holds import views as holds_views
from ops import api as ops_api
from ops import views as ops_views
from shop import api as shop_api
from storefront import views

api_patterns = [
    path("", api_views.index, name="api-index"),
    path("openapi.json", api_views.openapi, name="api-openapi"),
    path("me", shop_api.me, name="api-me"),
    path("drops/<slug:slug>", shop_api.drop_detail, name="api-drop"),
    path("drops/<slug:slug>/holds", holds_api.reserve, name="api-reserve"),
    path("drops/<slug:slug>/queue", admission_api.queue, name="api-queue"),
    path("drops/<slug:slug>/queue/draw", admission_api.draw, name="api-queue-draw"),
    path("holds/<str:hold_id>", holds_api.hold, name="api-hold"),
    path("holds/<str:hold_id>/payment", checkout_api.start_payment, name="api-payment"),
    path("orders", checkout_api.orders, name="api-orders"),
    path("orders/<str:order_id>", checkout_api.order, name="api-order"),
    path("ops/drops/<slug:slug>/invariant", ops_api.drop_invariant, name="api-ops-invariant"),
    path("ops/drops/<slug:slug>/pause", ops_api.pause, name="api-ops-pause"),
    path("ops/drops/<slug:slug>/resume", ops_api.resume, name="api-ops-resume"),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("drops/<slug:slug>/", views.drop, name="drop"),
    path("drops/<slug:slug>/queue/", admission_views.queue, name="drop-queue"),
    path("drops/<slug:slug>/buy", holds_views.buy, name="buy"),
    path("holds/<int:hold_id>/", holds_views.hold, name="hold"),
    path("holds/<int:hold_id>/release", holds_views.release, name="release"),
    path("holds/<int:hold_id>/pay", checkout_views.pay, name="pay"),
    path("orders/", checkout_views.orders, name="orders"),
    path("orders/<int:order_id>/", checkout_views.order, name="order"),
    path("checkout/webhooks/<str:provider>", checkout_views.webhook, name="webhook"),
    path("accounts/signup/", views.signup, name="signup"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("terms/", views.terms, name="terms"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("healthz", views.healthz, name="healthz"),
    path("metrics", ops_views.metrics, name="metrics"),
    path("api/", include(api_patterns)),
    # Any other path under /api/ (a newline too, which <path:...> would not match) is a JSON 404.
    re_path(r"^api/(?P<path>(?s:.*))$", api_views.unknown),
]

handler404 = "storefront.views.not_found"
