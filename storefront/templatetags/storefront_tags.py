"""Template side of core.formatting: prices in the buyer's locale, durations and counts in words."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from html import escape

from django import template
from django.conf import settings
from django.contrib.staticfiles import finders
from django.template.context import Context
from django.templatetags.static import static
from django.utils import translation
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from admission import work
from core import formatting
from inventory.models import Unit
from inventory.selectors import Seat
from shop import addresses, pricing
from shop.models import Drop, Product

register = template.Library()


def _locale(context: Context) -> str:
    """The page's language (LocaleMiddleware's choice), with the browser's region if it agrees."""
    request = context.get("request")
    header = request.headers.get("Accept-Language", "") if request is not None else ""
    return formatting.locale_for(translation.get_language(), header)


@register.simple_tag(takes_context=True)
def price(context: Context, amount_minor: int, currency: str, quantity: int = 1) -> str:
    """{% price product.price_minor product.currency %} -> "€129.00"; with a quantity, the total."""
    return formatting.money(int(amount_minor) * int(quantity), str(currency), _locale(context))


@register.simple_tag
def tax_name() -> str:
    return str(settings.TAX_NAME)


@register.simple_tag
def tax_note() -> str:
    """The footer's word on tax: what is true for this shop's rates and setting (shop.pricing)."""
    return pricing.shop_footer_note()


@register.filter
def percent(rate: Decimal) -> str:
    return pricing.rate_text(Decimal(rate))


@register.filter
def duration(seconds: float) -> str:
    return formatting.duration(float(seconds))


@register.simple_tag
def wait(low_seconds: int, high_seconds: int) -> str:
    """{% wait place.eta_low_seconds place.eta_high_seconds %} -> "between 2 and 4 minutes"."""
    return formatting.wait(int(low_seconds), int(high_seconds))


@register.filter
def units(count: int) -> str:
    return formatting.units(int(count))


@register.filter
def seats(labels: Iterable[str]) -> str:
    return formatting.seats(labels)


@register.filter
def unit_seats(units: Iterable[Unit]) -> str:
    """A hold's unit rows -> "seat B2" / "seats A1, A2" ("" for units from buckets)."""
    return formatting.seats(unit.label for unit in units)


@register.simple_tag
def moment(when: datetime, style: str = "time") -> str:
    """A UTC time the page's script completes with the buyer's own clock ("14:05 UTC · 15:05 your time")."""
    utc = when.astimezone(UTC)
    shown = utc.strftime("%H:%M:%S") if style == "time" else formatting.day_and_time(utc)
    return format_html('<time datetime="{}" data-local="{}">{} UTC</time>', utc.isoformat(), style, shown)


@register.simple_tag
def product_image(product: Product) -> str:
    """The product's picture: the one uploaded, its image URL, else a drawing shipped for its SKU,
    else a neutral one."""
    if product.image:
        return product.image.url
    if product.image_url:
        return product.image_url
    return static(_drawing_for(product.sku))


@lru_cache(maxsize=512)
def _drawing_for(sku: str) -> str:
    path = f"img/products/{sku.lower()}.svg"
    return path if finders.find(path) else "img/product.svg"


@register.simple_tag
def join_challenge(drop: Drop, user: object) -> work.Challenge | None:
    """A fresh proof-of-work challenge for this buyer's place in this drop's line (admission.work);
    None before the waiting room opens (the button says when it does)."""
    try:
        return work.issue(drop=drop, buyer_id=getattr(user, "pk", 0) or 0)
    except work.RoomNotOpen:
        return None


@register.simple_tag
def room_opens(drop: Drop) -> datetime:
    """When a drop asking proof of work starts issuing challenges (admission.work.ROOM_OPENS)."""
    return work.room_opens_at(drop)


@register.simple_tag
def seat_grid(seats: Iterable[Seat]) -> str:
    """The seat picker's buttons, one radio per seat (taken ones disabled). Built with the standard
    library's escape, not a template loop or format_html: the drop page of a seated drop is drawn
    for every buyer at the start, and Django's lazy-aware escaping costs ~15 ms for 300 seats."""
    parts = []
    taken = escape(_("(taken)"))
    for seat in seats:
        label = escape(seat.label, quote=True)
        if seat.free:
            parts.append(
                f'<label class="seat"><input type="radio" name="unit" value="{label}">'
                f"<span>{label}</span></label>"
            )
        else:
            parts.append(
                f'<label class="seat taken"><input type="radio" name="unit" value="{label}" disabled>'
                f'<span>{label}</span><span class="visually-hidden"> {taken}</span></label>'
            )
    return mark_safe("".join(parts))  # every label escaped above


@register.simple_tag
def seat_options(labels: Iterable[str]) -> str:
    """<option>s of the free seats, for drops with more seats than the picker draws."""
    options = (f'<option value="{escape(label, quote=True)}">{escape(label)}</option>' for label in labels)
    return mark_safe("".join(options))  # every label escaped


@register.filter(is_safe=True)
def sentence_case(text: object) -> str:
    """allauth's title-case headings and buttons in the shop's sentence case."""
    return formatting.sentence_case(str(text))


def _both(singular: str, plural: str, **values: str) -> list[str]:
    """One and many of an ngettext message, "{n}" standing for the number a script fills in (the
    shop's languages have two plural forms)."""
    return [ngettext(singular, plural, count) % values for count in (1, 2)]


@register.simple_tag
def queue_words() -> dict[str, object]:
    """The waiting room script's words (static/js/queue.js) in the page's language: it holds none."""
    return {
        "lang": translation.get_language() or settings.LANGUAGE_CODE,
        "unit": _both("%(count)s unit", "%(count)s units", count="{n}"),
        "minute": _both("%(count)s minute", "%(count)s minutes", count="{n}"),
        "hour": _both("%(count)s hour", "%(count)s hours", count="{n}"),
        "people": _both("%(ahead)s person ahead of you", "%(ahead)s people ahead of you", ahead="{n}"),
        "left": _("%(left)s left") % {"left": "{units}"},
        "coming": _(" (%(count)s coming back to the line)") % {"count": "{n}"},
        "unlikely": _(
            "%(ahead)s ahead of you, %(left)s left: you are unlikely to get one. You keep your place in "
            "case buyers ahead do not buy."
        )
        % {"ahead": "{ahead}", "left": "{units}"},
        "unlikely_by_key": _(
            "At least %(ahead)s ahead of you, %(left)s left: you are unlikely to get one. You keep your "
            "place in case buyers ahead do not buy."
        )
        % {"ahead": "{ahead}", "left": "{units}"},
        "drawn_behind": _("Your ticket: #%(number)s or later (your exact place follows in a minute)")
        % {"number": "{n}"},
        "ticket": _("Your ticket"),
        "next": _("you are next"),
        "soon": _("any moment"),
        "paused": _("on hold while the sale is paused"),
        "all_held": _("on hold until units come back"),
        "sold_out": _("the line is closed: sold out"),
        "working": _("working it out…"),
        "under_a_minute": _("under a minute"),
        "up_to": _("up to %(time)s") % {"time": "{time}"},
        "between": _("between %(low)s and %(high)s") % {"low": "{low}", "high": "{high}"},
        "live": _("Updating live"),
        "polling": _("Checking every few seconds"),
        "reconnecting": _("Reconnecting… (checking every few seconds meanwhile)"),
        # Spoken (queue.js's announcer), not shown: the place at a calm pace, the turn at once.
        "place": _("Your place in line: %(position)s. Estimated wait: %(wait)s.")
        % {"position": "{position}", "wait": "{wait}"},
        "your_turn": _("It's your turn: reserve now."),
        "offered": _("A unit came back for you: it is held until %(time)s.") % {"time": "{time}"},
        "turn_title": _("Your turn"),
    }


@register.simple_tag
def verify_words() -> dict[str, str]:
    """The draw checker's words (static/js/verify.js) in the page's language; {name} marks what the
    script fills in."""
    return {
        "round": _("drand {chain} round {round}"),
        "beacon_unnamed": _("A beacon value is mixed in, but no beacon round was named."),
        "no_beacon": _("No beacon round was named: the order rests on the seed and the entry list alone."),
        "late_close": _("The entry list did not close before {round} was due."),
        "closed_in_time": _("The entry list closed ({closed}) before {round} was due ({due})."),
        "unread_mixed": _("The round was not read, yet a beacon value is mixed in."),
        "unread": _(
            "{round} could not be read at the draw ({note}): the order rests on the committed seed and "
            "the entry list alone."
        ),
        "beacon_ok": _(
            "The beacon value {beacon} is the SHA-256 of {round}'s signature (the signature itself: "
            "manage.py verify_draw or any drand client)."
        ),
        "beacon_bad": _("The beacon value is not the SHA-256 of {round}'s published signature."),
        "seed_ok": _("The seed matches the hash published before the first join."),
        "seed_bad": _("The seed does not match the hash published before the first join."),
        "list_ok": _("The list of {count} entries matches the hash published when it closed."),
        "list_bad": _("The list of entries does not match the hash published when it closed."),
        "order_ok": _("Every published place is the place the rule gives."),
        "order_bad": _("The published places are not the order the rule gives."),
        "no_crypto": _("This browser cannot compute SHA-256 here (it needs https)."),
        "not_drawn": _("The draw has not run yet: it runs at the start. Seed SHA-256: {sha}"),
        "ticket_differs": _("Your ticket says {number}, the draw gives {place}."),
        "mismatch": _("Mismatch: the draw does not check out. {problems}"),
        "not_among": _(
            "Entry {entry} is not among the drawn entries (it joined after the start, or does not exist)."
        ),
        "place_ok": _("Your place {place} is verified: entry {entry} is number {place} of {count}."),
        "all_ok": _("The draw of {count} entries is verified. Enter an entry number to see its place."),
        "failed": _("Could not check the draw: {error}"),
    }


@register.simple_tag
def greeting(user: object) -> str:
    """An e-mail's first line: "Hello Ada Lovelace," when the buyer's name is known, else "Hello,"."""
    name = addresses.name_of(user)
    return _("Hello %(name)s,") % {"name": name} if name else _("Hello,")
