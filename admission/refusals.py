"""The edge's "no" to a reserve that would surely fail now, in Django's own words.

Every branch is a "no" that a stale snapshot can only make too early (a buyer turned away who
might have won), never a "yes": whatever might succeed goes through to the claim statements.
"""

from __future__ import annotations

import html

from django.utils import translation
from django.utils.translation import gettext, gettext_lazy

from admission import tokens
from admission.published import Known
from core.asgi import SLUG, Answer
from core.errors import Busy, Ended, FloodgateError, NotAdmitted, NotStarted, Paused, SoldOut, fill

# Django's own wording for the same refusals (holds.services, inventory.services), in the
# request's language (core.asgi.language) as Django's are.
PAUSED = gettext_lazy("This sale is paused. It resumes shortly.")
ENDED = gettext_lazy("This drop has ended.")
SOLD_OUT = gettext_lazy("Sold out. Units come back if a buyer does not pay in time.")
BUSY = gettext_lazy("The shop is very busy; try again in a second.")
# The refusals that read the same for every drop: their answers are built once per language.
CONSTANT = (PAUSED, ENDED, SOLD_OUT, BUSY)
_built: dict[tuple[str, str], Answer] = {}


def answer(error: FloodgateError, language: str) -> Answer:
    """The refusal's answer in the request's language; a constant one (paused, ended, sold out,
    busy: most of a crowd's refusals) from the answers built before, at the cost of a dict lookup."""
    if error.extra or not any(error.detail is words for words in CONSTANT):
        return Answer.error(error, language=language)
    key = (error.code, language)
    built = _built.get(key)
    if built is None:
        built = _built[key] = Answer.error(error, language=language)
    return built


def busy_json(language: str) -> Answer:
    """The reserve API's 503 when Django's claims are at their bound."""
    return answer(Busy(BUSY), language)


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
            return NotStarted(
                fill(gettext_lazy("This drop opens at %(starts)s UTC."), starts=format(starts, "%H:%M:%S")),
                starts_at=starts.isoformat(),
            )
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


def busy_page(slug: str, language: str) -> Answer:
    """The drop page's form posted when Django's claims are at their bound, in the buyer's language."""
    with translation.override(language):
        back, words = "", html.escape(gettext("Back to the drop"))
        if SLUG.fullmatch(slug):
            back = f' <a href="/drops/{html.escape(slug)}/">{words}</a>'
        title = html.escape(gettext("Very busy"))
        text = html.escape(gettext("The shop is very busy right now; press the button again in a second."))
    page = (
        f'<!doctype html><html lang="{html.escape(language)}"><meta charset="utf-8"><title>{title}</title>'
        f"<p>{text}{back}</p></html>"
    )
    headers = ((b"content-language", language.encode()), (b"vary", b"Accept-Language, Cookie"))
    return Answer(
        503, page.encode(), content_type=b"text/html; charset=utf-8", retry_after=1, headers=headers
    )
