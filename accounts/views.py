"""Account pages of our own (allauth serves sign-up, login, e-mail and password pages)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from accounts import services
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
