"""Storefront pages: the drop list, a drop, sign-up."""

from __future__ import annotations

import uuid

from django.contrib.auth import login
from django.contrib.auth.forms import UserCreationForm
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from shop import selectors
from shop.errors import NotFound


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/home.html", {"groups": selectors.storefront()})


def drop(request: HttpRequest, slug: str) -> HttpResponse:
    try:
        view = selectors.drop_view(slug=slug)
    except NotFound as error:
        raise Http404(error.detail) from None
    context = {
        "view": view,
        "drop": view.drop,
        # One key per page view: a double click or a resubmit returns the same hold.
        "idempotency_key": uuid.uuid4().hex,
        "quantities": range(1, view.drop.per_buyer_limit + 1),
    }
    return render(request, "shop/drop.html", context)


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    form = UserCreationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect(request.GET.get("next") or "home")
    return render(request, "registration/signup.html", {"form": form})


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")
