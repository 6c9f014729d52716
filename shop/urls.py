from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from shop import api_views, views

api_patterns = [
    path("", api_views.index, name="api-index"),
    path("openapi.json", api_views.openapi, name="api-openapi"),
    path("me", api_views.me, name="api-me"),
    path("drops/<slug:slug>", api_views.drop_detail, name="api-drop"),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("drops/<slug:slug>/", views.drop, name="drop"),
    path("accounts/signup/", views.signup, name="signup"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("admin/", admin.site.urls),
    path("healthz", views.healthz, name="healthz"),
    path("api/", include(api_patterns)),
    path("api/<path:path>", api_views.unknown),
]
