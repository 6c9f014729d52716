from __future__ import annotations

from allauth.account import views as allauth_views
from django.contrib import admin
from django.urls import include, path, re_path, reverse_lazy
from django.views.generic import RedirectView

from accounts import views as accounts_views
from admission import views as admission_views
from checkout import stripe_page
from checkout import views as checkout_views
from config import api, api_views
from fairness import views as fairness_views
from ops import views as ops_views
from sale import views as sale_views
from storefront import views

# The JSON API (config/api.py): each call declared once, in its package's api.py.
api_patterns = api.urlpatterns

# Django's own account pages were here before allauth: their addresses lead to allauth's.
old_account_addresses = [
    path("accounts/password_change/", RedirectView.as_view(pattern_name="account_change_password")),
    path("accounts/password_change/done/", RedirectView.as_view(pattern_name="account_change_password")),
    path("accounts/password_reset/", RedirectView.as_view(pattern_name="account_reset_password")),
    path("accounts/password_reset/done/", RedirectView.as_view(pattern_name="account_reset_password_done")),
    path(  # a link from Django's reset e-mail: ask for a fresh one
        "accounts/reset/<str:uidb64>/<str:token>/",
        RedirectView.as_view(url=reverse_lazy("account_reset_password")),
    ),
    path("accounts/reset/done/", RedirectView.as_view(pattern_name="login")),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("drops/<slug:slug>/", views.drop, name="drop"),
    path("drops/<slug:slug>/remind", views.remind, name="drop-remind"),
    path("drops/<slug:slug>/calendar.ics", views.drop_calendar, name="drop-calendar"),
    path("drops/<slug:slug>/queue/", admission_views.queue, name="drop-queue"),
    path("drops/<slug:slug>/queue/verify", admission_views.verify, name="drop-queue-verify"),
    path("drops/<slug:slug>/report/", fairness_views.report, name="drop-report"),
    path("drops/<slug:slug>/buy", sale_views.buy, name="buy"),
    path("holds/<int:hold_id>/", sale_views.hold, name="hold"),
    path("holds/<int:hold_id>/release", sale_views.release, name="release"),
    path("holds/<int:hold_id>/address", sale_views.address, name="hold-address"),
    path("holds/<int:hold_id>/discount", sale_views.discount, name="hold-discount"),
    path("holds/<int:hold_id>/size", sale_views.size, name="hold-size"),
    path("holds/<int:hold_id>/more-time", sale_views.more_time, name="hold-more-time"),
    path("holds/<int:hold_id>/pay", checkout_views.pay, name="pay"),
    path("holds/<int:hold_id>/pay-saved", checkout_views.pay_saved, name="pay-saved"),
    path("cards/", checkout_views.saved_cards, name="saved-cards"),
    path("cards/save", checkout_views.save_card, name="save-card"),
    path("cards/<int:card_id>/remove", checkout_views.remove_card, name="remove-card"),
    path("reminders/unsubscribe/<str:token>", checkout_views.unsubscribe, name="unsubscribe"),
    path("orders/", checkout_views.orders, name="orders"),
    path("orders/<int:order_id>/", checkout_views.order, name="order"),
    path("orders/<int:order_id>/cancel", checkout_views.cancel, name="order-cancel"),
    path("orders/<int:order_id>/exchange", checkout_views.order_exchange, name="order-exchange"),
    path("orders/<int:order_id>/invoices/<int:invoice_id>.pdf", checkout_views.invoice, name="order-invoice"),
    path("checkout/webhooks/<str:provider>", checkout_views.webhook, name="webhook"),
    path("checkout/stripe/<str:intent_id>", checkout_views.stripe_pay, name="stripe-pay"),
    # Buyer accounts are allauth's; the names `login`, `logout` and `signup` stay for our templates.
    path("accounts/login/", allauth_views.login, name="login"),
    path("accounts/logout/", allauth_views.logout, name="logout"),
    path("accounts/signup/", allauth_views.signup, name="signup"),
    path("accounts/api/", accounts_views.api_access, name="api-access"),
    path("accounts/data/", accounts_views.your_data, name="your-data"),
    path("accounts/data/download", accounts_views.data_download, name="your-data-download"),
    *old_account_addresses,
    path("accounts/", include("allauth.urls")),
    path("docs/api/", api_views.docs, name="api-docs"),
    path("admin/", admin.site.urls),
    path("terms/", views.legal, {"kind": "terms"}, name="terms"),
    path("legal/<slug:kind>/", views.legal, name="legal"),
    path("i18n/", include("django.conf.urls.i18n")),  # set_language: the footer's language switcher
    path("favicon.ico", views.favicon, name="favicon"),
    path("healthz", views.healthz, name="healthz"),
    # The push service worker: served from the root so its scope covers every page of the shop.
    path("push-worker.js", checkout_views.push_worker, name="push-worker"),
    # Uploaded product pictures: few and small, served by Django from MEDIA_ROOT (a CDN or the
    # balancer may serve the same folder in front of it).
    re_path(r"^media/(?P<path>.+)$", views.media, name="media"),
    path("metrics", ops_views.metrics, name="metrics"),
    path("api/", include(api_patterns)),
    # Any other path under /api/ (a newline too, which <path:...> would not match) is a JSON 404.
    re_path(r"^api/(?P<path>(?s:.*))$", api_views.unknown),
]

handler404 = "storefront.views.not_found"
handler500 = "storefront.views.server_error"

if stripe_page.card_fallback_mounted():
    # localstripe's Stripe.js cannot confirm in the browser; Stripe's own API never gets this route.
    urlpatterns.insert(
        0, path("checkout/stripe/<str:intent_id>/card", checkout_views.stripe_card, name="stripe-card")
    )
