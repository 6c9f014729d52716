"""Storefront pages: the drop list, a drop, the legal pages, the 404 page, the icon (sign-up and login
are allauth's, see accounts/)."""

from __future__ import annotations

import sys
import uuid

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, HttpResponseServerError
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.template import loader
from django.templatetags.static import static
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django.views.static import serve

from catalogue import selectors as catalogue
from checkout import reminders
from core.api import signed_in
from core.errors import FloodgateError, NotFound, database_not_now
from shop import calendar, identity, pictures, shipping
from shop import legal as legal_texts
from shop.models import DropState, LegalKind
from storefront import selectors


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/home.html", {"groups": catalogue.storefront()})


def drop(request: HttpRequest, slug: str) -> HttpResponse:
    buyer_id = request.user.pk if request.user.is_authenticated else None
    try:
        page = selectors.drop_page(slug=slug, buyer_id=buyer_id)
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    context = {
        "page": page,
        "view": page.view,
        "drop": page.view.drop,
        # One key per page view: a double click or a resubmit returns the same hold.
        "idempotency_key": uuid.uuid4().hex,
        "quantities": range(1, page.view.drop.per_buyer_limit + 1),
        # "+ shipping from ...": one query, for a product that ships only.
        "shipping_from": shipping.lowest_fee(page.view.drop.product),
        # Asking is open until the reminders go (for a waiting room, its opening: then join instead).
        "reminder_open": page.view.state == DropState.SCHEDULED
        and timezone.now() < reminders.reminded_at(page.view.drop),
        "reminded": buyer_id is not None
        and page.view.state == DropState.SCHEDULED
        and reminders.has_reminder(drop_id=page.view.drop.pk, buyer_id=buyer_id),
    }
    return render(request, "shop/drop.html", context)


def legal(request: HttpRequest, kind: str) -> HttpResponse:
    """A legal page (terms, privacy, notice, withdrawal) in the reader's language, the merchant's words."""
    if kind not in LegalKind.values:
        raise Http404(_("There is no such page."))
    shop = identity.current()
    body = legal_texts.text_for(kind, identity=shop)
    context = {"kind": kind, "title": LegalKind(kind).label, "body": legal_texts.html(body)}
    return render(request, "shop/legal.html", context)


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page links; send them to the shop's icon."""
    return redirect(static("img/favicon.svg"), permanent=True)


def media(request: HttpRequest, path: str) -> HttpResponseBase:
    """An uploaded product picture from MEDIA_ROOT (Django's file view: it refuses paths outside).
    Only the picture types an upload is kept as: any other file there is not served, inline or not."""
    if not path.lower().endswith(pictures.SERVED):
        raise Http404(_("Only product pictures (JPEG, PNG, WebP) are served here."))
    return serve(request, path, document_root=str(settings.MEDIA_ROOT))


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 404 page; says why only when the code said it in words (not a resolver's class name)."""
    message = exception.args[0] if isinstance(exception, Http404) and exception.args else None
    return render(request, "404.html", {"message": message if isinstance(message, str) else None}, status=404)


# Seconds a buyer is asked to wait when the database cannot answer (a failover takes 10-25 s).
DATABASE_AWAY_RETRY = 5


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's 500 handler. A database that cannot answer right now (a failover, a partition, the
    pool's wait run out) is no fault of the buyer's request: it is answered 503 "busy, try again in
    a few seconds" with Retry-After, the page retrying by itself. Rendered without the request or
    the database, as 500.html is (they may be what failed)."""
    error = sys.exc_info()[1]
    if isinstance(error, DatabaseError) and database_not_now(error):
        page = loader.get_template("503.html").render({"retry": DATABASE_AWAY_RETRY})
        response = HttpResponse(page, status=503)
        response["Retry-After"] = str(DATABASE_AWAY_RETRY)
        return response
    return HttpResponseServerError(loader.get_template("500.html").render())


def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok", content_type="text/plain")


@require_POST
@login_required
def remind(request: HttpRequest, slug: str) -> HttpResponse:
    """The drop page's "Tell me when it opens" (or, with forget=1, "No reminder after all")."""
    try:
        drop = reminders.drop_for_reminder(slug=slug)
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    forget = request.POST.get("forget")
    if forget not in (None, "1"):
        return HttpResponseBadRequest("forget is 1 (no reminder after all) or absent (remind me).")
    if forget == "1":
        reminders.cancel_reminder(drop=drop, buyer_id=signed_in(request))
        messages.info(request, _("No reminder, then: nothing will be sent."))
        return redirect(drop)
    try:
        reminders.ask_reminder(drop=drop, buyer_id=signed_in(request))
    except FloodgateError as error:
        messages.error(request, error.detail)
        return render(request, "shop/reminder_refused.html", {"drop": drop}, status=error.status)
    if drop.waiting_room:
        messages.success(
            request, _("We will e-mail you when its waiting room opens, an hour before the sale.")
        )
    else:
        messages.success(request, _("We will e-mail you when the sale opens."))
    return redirect(drop)


@require_GET
def drop_calendar(request: HttpRequest, slug: str) -> HttpResponse:
    """The drop's start as an .ics file, for any visitor's calendar."""
    try:
        drop = reminders.drop_for_reminder(slug=slug)
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    answer = HttpResponse(
        calendar.drop_event(drop, stamped_at=timezone.now()), content_type="text/calendar; charset=utf-8"
    )
    answer["Content-Disposition"] = f'attachment; filename="{calendar.file_name(drop)}"'
    return answer
