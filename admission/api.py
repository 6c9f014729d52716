"""JSON API of the waiting room: join, look at your place, check the draw."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import get_conditional_response, patch_vary_headers
from django.utils.http import http_date

from admission import draw_record, limits, services, state, tokens
from catalogue import selectors as catalogue
from core.api import api, signed_in


@api({"GET", "POST"}, login=True)
def queue(request: HttpRequest, slug: str) -> JsonResponse:
    if request.method == "POST":
        limits.check_buyer(request, scope="queue")  # before the drop is looked up
    buyer_id = signed_in(request)
    drop = catalogue.drop_for_buyer(slug=slug, buyer_id=buyer_id)
    if request.method == "POST":
        place = services.join(
            drop=drop,
            buyer_id=buyer_id,
            proof=request.headers.get("X-Join-Proof"),
            challenge=request.headers.get("X-Join-Challenge"),
        )
    else:
        if drop.waiting_room:
            # A poll that reached Django may have found no fresh snapshot (beat down, key gone):
            # publish the one computed here, so the next polls are answered at the edge.
            state.current(drop, publish_computed=True)
        place = services.place(drop=drop, buyer_id=buyer_id)
    ticket = queue_ticket(request, place)
    response = JsonResponse(place.as_json(queue_ticket=ticket))
    remember(response, slug=drop.slug, ticket=ticket)
    return response


# Once drawn the document never changes: caches may keep it a day without asking (a rehearsal's
# copy only in the browser of the buyer it belongs to); before the draw they must ask each time.
DRAWN_CACHE = "public, max-age=86400, immutable"
REHEARSAL_DRAWN_CACHE = "private, max-age=86400, immutable"
UNDRAWN_CACHE = "no-cache"


@api({"GET"})
def draw(request: HttpRequest, slug: str) -> HttpResponse:
    """The draw's record (admission/draw_record.py): once drawn, kept, and 304 for a client that has it."""
    drop = catalogue.drop_for_buyer(slug=slug, buyer_id=request.user.pk)  # pk None: a visitor
    drawn = draw_record.drawn(drop=drop)
    response = None
    if drawn is not None:
        response = get_conditional_response(request, etag=drawn.etag, last_modified=int(drawn.at.timestamp()))
    if response is None:
        body = draw_record.document(drop=drop, drawn=drawn)
        response = HttpResponse(body, content_type="application/json")
    if drawn is None:
        response["Cache-Control"] = UNDRAWN_CACHE
        return response
    response["ETag"] = drawn.etag
    patch_vary_headers(response, ["Accept-Language", "Cookie"])  # `trust` is in the reader's language
    response["Last-Modified"] = http_date(drawn.at.timestamp())
    response["Cache-Control"] = DRAWN_CACHE if drop.rehearsal_of_id is None else REHEARSAL_DRAWN_CACHE
    return response


def queue_ticket(request: HttpRequest, place: services.Standing) -> str | None:
    """The signed ticket for this buyer's next polls, bound to how they signed in."""
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    bearer = raw.strip() if scheme.lower() == "bearer" else None  # core.api accepted it already
    return services.queue_ticket(
        place, bound_to=tokens.credential(bearer=bearer, session_key=request.session.session_key)
    )


def remember(response: HttpResponse, *, slug: str, ticket: str | None) -> None:
    """The ticket as a cookie sent only to this drop's queue API: the page's polls carry it unchanged."""
    if ticket is not None:
        response.cookies.update(tokens.ticket_cookie(slug, ticket))
