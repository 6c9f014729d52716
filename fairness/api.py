"""JSON API of the public report: the figures with every outcome, and one entry's inclusion proof."""

from __future__ import annotations

import re

from django.http import HttpRequest, JsonResponse
from django.utils.cache import patch_cache_control
from django.utils.translation import gettext_lazy
from ninja import Router

from catalogue import selectors as catalogue
from core.api import operation
from core.errors import InvalidInput
from fairness import answers, services
from shop.models import Drop

# Published, the figures never change; the merchant's note may, so a cache asks again after a minute.
MAX_AGE = 60
ENTRY = re.compile(r"[0-9]{1,18}")  # a ticket id is a bigint; ASCII digits only ("²" is a digit too)
router = Router()


@operation(
    router,
    "GET",
    "/drops/{slug:slug}/report",
    "The drop's public report, published when it is over: figures and every entry's outcome",
    {
        200: ("The figures, the merchant's note, and the Merkle root over the outcomes", answers.Report),
        404: "No such drop",
        409: "report_not_published: the drop is not over, or a buyer still holds a unit",
        503: "busy: the door's counts cannot be read right now",
    },
    url_name="api-report",
)
def report(request: HttpRequest, slug: str) -> JsonResponse:
    drop = catalogue.drop_for_buyer(slug=slug, buyer_id=request.user.pk)
    found = services.report(drop, with_leaves=True)
    response = JsonResponse(
        answers.Report(
            drop=drop.slug,
            published_at=found.published_at,
            note=found.note,
            root=found.root,
            size=found.size,
            rule=answers.RULE,
            figures=answers.Figures.model_validate(found.figures),
            leaves=found.leaves,
        ).dump()
    )
    _cache(response, drop)
    return response


@operation(
    router,
    "GET",
    "/drops/{slug:slug}/report/entries/{entry}",
    "One entry's outcome with its inclusion proof: recompute the root and compare",
    {
        200: (
            "The outcome line, its index, the tree's size, the sibling hashes, the root",
            answers.Inclusion,
        ),
        404: "No such drop, or no such entry in its report",
        409: "report_not_published",
        422: "invalid: the entry is not a number",
        503: "busy: the door's counts cannot be read right now",
    },
    url_name="api-report-entry",
)
def entry(request: HttpRequest, slug: str, entry: str) -> JsonResponse:
    if not ENTRY.fullmatch(entry):
        raise InvalidInput(
            gettext_lazy("An entry is its number, as the waiting room showed it (digits only).")
        )
    drop = catalogue.drop_for_buyer(slug=slug, buyer_id=request.user.pk)
    document = services.inclusion(services.report(drop), entry=int(entry))
    response = JsonResponse(answers.Inclusion.model_validate(document).dump())
    _cache(response, drop)
    return response


def _cache(response: JsonResponse, drop: Drop) -> None:
    """Shared caches may keep a report a minute; a rehearsal's copy only its buyer's browser."""
    if drop.rehearsal_of_id is None:
        patch_cache_control(response, public=True, max_age=MAX_AGE)
    else:
        patch_cache_control(response, private=True, max_age=MAX_AGE)
