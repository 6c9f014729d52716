"""The edge's "no" to a reserve that would surely fail now, in Django's own words.

Every branch is a "no" that a stale snapshot can only make too early (a buyer turned away who
might have won), never a "yes": whatever might succeed goes through to the claim statements.
"""

from __future__ import annotations

import html

from admission import tokens
from admission.published import Known
from admission.routes import SLUG
from core.asgi import Answer
from core.errors import Busy, Ended, FloodgateError, NotAdmitted, NotStarted, Paused, SoldOut

# Django's own wording for the same refusals (holds.services, inventory.services).
PAUSED = "This sale is paused. It resumes shortly."
ENDED = "This drop has ended."
SOLD_OUT = "Sold out. Units come back if a buyer does not pay in time."
BUSY = "The shop is very busy; try again in a second."

BUSY_JSON = Answer.error(Busy(BUSY))


def refusal(known: Known, *, token: str | None, now: float) -> FloodgateError | None:
    """Why a reserve would surely fail now, in the order Django checks; None: let it try."""
    drop = known.drop
    current = drop["state"]
    if current == "paused":
        return Paused(PAUSED)
    just_opened = False
    if current == "scheduled":
        presale = known.presale_starts_at
        if presale is not None and presale <= now < known.starts_at.timestamp():
            return None  # the presale: only the claim's transaction knows a code or the list
        if now < known.starts_at.timestamp():
            starts = known.starts_at
            return NotStarted(f"This drop opens at {starts:%H:%M:%S} UTC.", starts_at=starts.isoformat())
        just_opened = True  # the next snapshot says so; only the admission is certain meanwhile
    elif current == "ended" or now >= known.ends_at:
        return Ended(ENDED)
    if drop.get("waiting_room") is True and known.drop_id is not None:
        try:
            tokens.claims(token, drop_id=known.drop_id)  # HMAC only; Django checks the buyer
        except NotAdmitted as error:
            return error
    if just_opened:
        return None  # Django decides
    if drop.get("sold_out") is True:
        return SoldOut(SOLD_OUT)
    return None


def busy_page(slug: str) -> Answer:
    """The drop page's form posted when Django's claims are at their bound."""
    back = f' <a href="/drops/{html.escape(slug)}/">Back to the drop</a>' if SLUG.fullmatch(slug) else ""
    page = (
        '<!doctype html><html lang="en"><meta charset="utf-8"><title>Very busy</title>'
        f"<p>The shop is very busy right now; press the button again in a second.{back}</p></html>"
    )
    return Answer(503, page.encode(), content_type=b"text/html; charset=utf-8", retry_after=1)
