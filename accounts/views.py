"""Account pages of our own (allauth serves sign-up, login, e-mail and password pages)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from accounts import privacy, services
from catalogue import selectors
from core.api import signed_in

ACTIONS = {"create", "revoke"}


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def api_access(request: HttpRequest) -> HttpResponse:
    """Make or revoke the buyer's API bearer token; a new token is shown on this answer only."""
    token = None
    if request.method == "POST":
        action = request.POST.get("action")
        if action not in ACTIONS:
            messages.error(request, _("Choose 'Create a token' or 'Revoke the token'; nothing was changed."))
            return redirect("api-access")
        if action == "create":
            token = services.create_token(user_id=signed_in(request))
        elif services.revoke_token(user_id=signed_in(request)):
            messages.success(request, _("Your API token is revoked; it no longer works."))
            return redirect("api-access")
        else:
            messages.info(request, _("You had no API token; nothing was changed."))
            return redirect("api-access")
    created_at = selectors.api_token_created_at(user_id=signed_in(request))
    return render(request, "accounts/api_access.html", {"token": token, "created_at": created_at})


ERASE_WORD = "ERASE"


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def your_data(request: HttpRequest) -> HttpResponse:
    """The buyer's data: download all of it, or erase the person (typed confirmation)."""
    if request.method == "POST":
        if request.POST.get("confirm", "").strip() != ERASE_WORD:
            messages.error(request, _("Type ERASE to confirm; nothing was changed."))
            return redirect("your-data")
        if request.user.is_staff:
            messages.error(request, _("A staff account cannot erase itself here; nothing was changed."))
            return redirect("your-data")
        privacy.erase(user_id=signed_in(request))
        logout(request)
        return render(request, "accounts/erased.html")
    return render(request, "accounts/your_data.html", {"erase_word": ERASE_WORD})


@never_cache
@login_required
@require_http_methods(["GET"])
def data_download(request: HttpRequest) -> HttpResponse:
    body = json.dumps(privacy.export(user_id=signed_in(request)), indent=2, ensure_ascii=False)
    answer = HttpResponse(body, content_type="application/json; charset=utf-8")
    answer["Content-Disposition"] = 'attachment; filename="my-data.json"'
    return answer
