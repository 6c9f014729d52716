"""The public report's page: the figures, the merchant's note, and the signed-in buyer's own outcome
with a check of its proof in the browser (static/js/report.js)."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.translation import gettext
from django.views.decorators.http import require_http_methods

from admission import services as line
from catalogue import selectors as catalogue
from core.errors import Busy, NotFound
from fairness import answers, chart, outcomes, services
from shop.models import Drop


def words() -> dict[str, str]:
    """What report.js says, in the page's language: the script holds no words of its own."""
    return {
        "checking": gettext("Checking…"),
        "verified": gettext("Verified: your outcome is in the tree whose root the shop published, {root}."),
        "mismatch": gettext("Does not verify: {why}"),
        "wrong_root": gettext("the proof leads to {computed}, not to the published root"),
        "bad_shape": gettext("the proof does not fit a tree of this size"),
        "not_yours": gettext("the outcome is not your entry's"),
        "not_shown": gettext("the outcome proven is not the one this page shows"),
        "unreadable": gettext("the proof could not be read"),
    }


@require_http_methods(["GET", "HEAD"])
def report(request: HttpRequest, slug: str) -> HttpResponse:
    try:
        drop = catalogue.drop_for_buyer(slug=slug, buyer_id=request.user.pk)
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    context: dict[str, object] = {"drop": drop, "words": words()}
    try:
        found = services.report(drop)
    except services.NotPublished as error:
        context["not_yet"] = error.detail
        return render(request, "fairness/report.html", context)
    except Busy as error:  # the door's counts could not be read: publish on a later request
        context["not_yet"] = error.detail
        response = render(request, "fairness/report.html", context, status=503)
        response["Retry-After"] = str(error.retry_after)
        return response
    figures = answers.Figures.model_validate(found.figures)
    context |= {
        "report": found,
        "figures": figures,
        "size": found.size,
        "chart": _chart(drop, figures),
    }
    if request.user.is_authenticated and (mine := line.own_ticket(drop=drop, buyer_id=request.user.pk)):
        try:
            document = services.inclusion(found, entry=mine.pk)
        except NotFound:
            document = None  # joined after the report was published
        if document is not None:
            context |= {"mine": document, "outcome": outcomes.parse(str(document["leaf"]))}
    return render(request, "fairness/report.html", context)


def _chart(drop: Drop, figures: answers.Figures) -> chart.Chart | None:
    if figures.admissions is None:
        return None
    waves = [(mark.at, mark.admitted_through) for mark in figures.admissions.waves]
    offers = [(offer.at, offer.place) for offer in figures.offers if offer.place is not None]
    return chart.line(drop.starts_at, waves, offers)
