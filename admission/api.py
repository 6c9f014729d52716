"""JSON API of the waiting room: join, look at your place, check the draw."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import get_conditional_response, patch_vary_headers
from django.utils.http import http_date
from ninja import Router

from admission import draw_record, limits, services, state, tokens
from admission.answers import Draw, Place
from catalogue import selectors as catalogue
from core.api import Answers, Header, operation, signed_in

router = Router()
QUEUE_ERRORS: Answers = {
    404: "No such drop (or, for GET, not in its queue: not_in_queue)",
    409: "no_waiting_room; sold_out (POST, a new buyer: sold out with none held, the line is closed); "
    "room_not_open (POST, a drop asking proof of work, earlier than opens_at); "
    "entries_closed (POST, a new entry to a raffle after its entries closed at closed_at)",
    410: "ended: the queue is closed",
}


@operation(
    router,
    "POST",
    "/drops/{slug:slug}/queue",
    "Join the waiting room; joining again returns the same ticket",
    {
        200: ("Your place", Place),
        **QUEUE_ERRORS,
        428: "proof_of_work_required: a new place in this drop's line needs a nonce whose "
        "sha256('<challenge>:<nonce>') starts with `bits` zero bits, sent as X-Join-Proof "
        "with the challenge as X-Join-Challenge before `expires_at`; a challenge is spent "
        "by one join, and a refused one comes back with a fresh challenge",
        429: "rate_limited; see Retry-After",
        503: "busy (Redis down or the line is catching up); see Retry-After",
    },
    login=True,
    headers=(
        Header(
            "X-Join-Proof",
            {"type": "string", "pattern": "^[0-9a-z]{1,32}$"},
            description="The proof of work's nonce, for drops that ask one (see 428)",
        ),
        Header(
            "X-Join-Challenge",
            {"type": "string", "pattern": "^[0-9]{10}[.][0-9a-f]{8}[.][0-9a-f]{16}$"},
            description="The challenge the proof solves, as the last 428 gave it",
        ),
    ),
    url_name="api-queue",
)
def join(request: HttpRequest, slug: str) -> JsonResponse:
    limits.check_buyer(request, scope="queue")  # before the drop is looked up
    drop = catalogue.drop_for_buyer(slug=slug, buyer_id=signed_in(request))
    place = services.join(
        drop=drop,
        buyer_id=signed_in(request),
        proof=request.headers.get("X-Join-Proof"),
        challenge=request.headers.get("X-Join-Challenge"),
    )
    return _answer(request, drop.slug, place)


@operation(
    router,
    "GET",
    "/drops/{slug:slug}/queue",
    "Your place in the waiting room (a fresh admission token once admitted)",
    {200: ("Your place", Place), **QUEUE_ERRORS},
    login=True,
    headers=(
        Header(
            "X-Queue-Ticket",
            {"type": "string"},
            description="The queue_ticket of an earlier answer, sent with the same credential",
        ),
    ),
    url_name="api-queue",
)
def place(request: HttpRequest, slug: str) -> JsonResponse:
    drop = catalogue.drop_for_buyer(slug=slug, buyer_id=signed_in(request))
    if drop.waiting_room:
        # A poll that reached Django may have found no fresh snapshot (beat down, key gone):
        # publish the one computed here, so the next polls are answered at the edge.
        state.current(drop, publish_computed=True)
    return _answer(request, drop.slug, services.place(drop=drop, buyer_id=signed_in(request)))


def _answer(request: HttpRequest, slug: str, place: services.Standing) -> JsonResponse:
    ticket = queue_ticket(request, place)
    response = JsonResponse(place.as_json(queue_ticket=ticket))
    remember(response, slug=slug, ticket=ticket)
    return response


# Once drawn the document never changes: caches may keep it a day without asking (a rehearsal's
# copy only in the browser of the buyer it belongs to); before the draw they must ask each time.
DRAWN_CACHE = "public, max-age=86400, immutable"
REHEARSAL_DRAWN_CACHE = "private, max-age=86400, immutable"
UNDRAWN_CACHE = "no-cache"


@operation(
    router,
    "GET",
    "/drops/{slug:slug}/queue/draw",
    "Check the draw: the seed's hash before the start; seed and entries after",
    {
        200: (
            "Sort the entries by sha256('<seed>:<entry>'); the first gets ticket 1 (after the "
            "draw with ETag and Last-Modified: the record never changes)",
            Draw,
        ),
        304: ("If-None-Match or If-Modified-Since names the drawn record: unchanged", None),
        404: "No such drop",
        409: "no_waiting_room",
    },
    url_name="api-queue-draw",
)
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
    bearer = raw.strip() if scheme.lower() == "bearer" else None  # core.api's BearerToken accepted it already
    return services.queue_ticket(
        place, bound_to=tokens.credential(bearer=bearer, session_key=request.session.session_key)
    )


def remember(response: HttpResponse, *, slug: str, ticket: str | None) -> None:
    """The ticket as a cookie sent only to this drop's queue API: the page's polls carry it unchanged."""
    if ticket is not None:
        response.cookies.update(tokens.ticket_cookie(slug, ticket))
