"""How money, times, durations, counts and seats read to a person: the one place pages and e-mails
format them.

Money follows the buyer's locale (Babel's CLDR data): 12900 EUR is "€129.00" in English,
"129,00 €" in German. Words are in the active language (gettext: "1 Stück", "8 Minuten").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache

from babel import Locale, UnknownLocaleError
from babel.dates import format_datetime
from babel.numbers import format_currency, format_decimal, get_currency_precision
from django.utils import dateformat, timezone, translation
from django.utils.functional import lazy
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.utils.translation.trans_real import parse_accept_lang_header

DEFAULT_LOCALE = "en"


@lru_cache(maxsize=256)
def locale_from_header(accept_language: str) -> str:
    """The first locale of an Accept-Language header that Babel knows ("de-AT,de;q=0.9" -> "de_AT")."""
    for tag, _quality in parse_accept_lang_header(accept_language[:255]):
        if tag == "*":
            continue
        try:
            return str(Locale.parse(tag, sep="-"))
        except (UnknownLocaleError, ValueError, TypeError):
            continue
    return DEFAULT_LOCALE


def locale_for(language: str | None, accept_language: str = "") -> str:
    """The Babel locale of the active language, with the browser's region when it names the same
    language ("de" + "de-AT,de;q=0.9" -> "de_AT"; "de" + "en-GB" -> "de")."""
    base = (language or DEFAULT_LOCALE).split("-")[0].lower()
    if accept_language:
        wanted = locale_from_header(accept_language)
        if wanted.split("_")[0].lower() == base:
            return wanted
    return base


def current_locale() -> str:
    """The Babel locale of the active language (an e-mail's, or a page's without a request)."""
    return locale_for(translation.get_language())


def money(amount_minor: int, currency: str, locale: str | None = None) -> str:
    """12900, "EUR" -> "€129.00" (en), "129,00 €" (de); the currency's own number of decimals.
    Without a locale, the active language's (an e-mail's, the admin's)."""
    locale = locale or current_locale()
    digits = get_currency_precision(currency)
    amount = Decimal(amount_minor).scaleb(-digits)
    try:
        return format_currency(amount, currency, locale=locale)
    except (UnknownLocaleError, ValueError):
        return format_currency(amount, currency, locale=DEFAULT_LOCALE)


def minor_units(amount: Decimal, currency: str) -> int:
    """Decimal("12.50"), "EUR" -> 1250; ValueError for more decimals than the currency has."""
    digits = get_currency_precision(currency)
    value = amount.scaleb(digits)
    if value != value.to_integral_value():
        raise ValueError(f"{currency} amounts have {digits} decimals at most.")
    return int(value)


def plain_amount(amount_minor: int, currency: str) -> str:
    """12900, "EUR" -> "129.00"; 999, "JPY" -> "999"; 9999, "BHD" -> "9.999": a spreadsheet's number,
    with the currency's own number of decimals (Babel's ISO 4217 data, as money() uses)."""
    return f"{Decimal(amount_minor).scaleb(-get_currency_precision(currency)):f}"


def count(number: int) -> str:
    """1200 -> "1,200" (en), "1.200" (de): a count grouped the active language's way."""
    return format_decimal(number, locale=current_locale())


def units(number: int) -> str:
    """1 -> "1 unit"; 1200 -> "1,200 units"; in German "1 Stück", "1.200 Stück"."""
    return ngettext("%(count)s unit", "%(count)s units", number) % {"count": count(number)}


def duration(seconds: float) -> str:
    """480 -> "8 minutes"; 90 -> "1 minute 30 seconds"; 3600 -> "1 hour"; 45 -> "45 seconds"."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = []
    if hours:
        parts.append(ngettext("%(count)s hour", "%(count)s hours", hours) % {"count": count(hours)})
    if minutes:
        parts.append(ngettext("%(count)s minute", "%(count)s minutes", minutes) % {"count": minutes})
    if secs and not hours:
        parts.append(ngettext("%(count)s second", "%(count)s seconds", secs) % {"count": secs})
    return " ".join(parts) or _("0 seconds")


def wait(low_seconds: int, high_seconds: int) -> str:
    """A wait's range in words, never "0": "under a minute", "up to 5 minutes", "between 2 and 4
    minutes", "between 2 and 3 hours". static/js/queue.js's waitWords says it the same way."""
    if high_seconds <= 60:
        return _("under a minute")
    hours = high_seconds > 90 * 60
    step = 3600 if hours else 60
    high = -(-high_seconds // step)
    low = max(1, low_seconds // step)
    plural = ("%(count)s hour", "%(count)s hours") if hours else ("%(count)s minute", "%(count)s minutes")
    high_words = ngettext(*plural, high) % {"count": count(high)}
    if low_seconds < step or low >= high:
        return _("up to %(time)s") % {"time": high_words}
    return _("between %(low)s and %(high)s") % {"low": count(low), "high": high_words}


def country(code: str, locale: str | None = None) -> str:
    """ "DE" -> "Germany" (en), "Deutschland" (de): the reader's own name for it; unknown as given."""
    return str(_babel_locale(locale or current_locale()).territories.get(code, code))


def by_name(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """(code, name) pairs in the order a reader looks for a name: accents and case set aside
    ("Österreich" among the O's, not after "Z")."""

    def key(pair: tuple[str, str]) -> str:
        return unicodedata.normalize("NFKD", pair[1]).encode("ascii", "ignore").decode().casefold()

    return sorted(pairs, key=key)


@lru_cache(maxsize=32)
def _babel_locale(locale: str) -> Locale:
    try:
        return Locale.parse(locale)
    except (UnknownLocaleError, ValueError):
        return Locale.parse(DEFAULT_LOCALE)


def seats(labels: Iterable[str]) -> str:
    """["B14", "A2"] -> "seats A2, B14"; one -> "seat B14"; none -> ""."""
    ordered = sorted(labels)
    if not ordered:
        return ""
    listed = ", ".join(ordered)
    return ngettext("seat %(labels)s", "seats %(labels)s", len(ordered)) % {"labels": listed}


def moment(when: datetime) -> str:
    """A time for an e-mail (no script there adds the reader's own clock): "Fri 4 Dec 2026, 18:00 UTC"."""
    return day_and_time(when) + " UTC"


def day_and_time(when: datetime) -> str:
    """ "Fri 4 Dec 2026, 18:00" in UTC, the day and month in the active language ("Fr. 4 Dez. 2026")."""
    return format_datetime(when.astimezone(UTC), "EEE d MMM y, HH:mm", tzinfo=UTC, locale=current_locale())


def shop_time(when: datetime, pattern: str = "Y-m-d H:i") -> str:
    """`when` on the shop's clock (settings.TIME_ZONE, the merchant's zone, active unless a request
    chose another), in Django's date pattern: "2026-12-06 15:03"; the admin's times, never UTC's."""
    return dateformat.format(timezone.localtime(when), pattern)


def shop_zone() -> str:
    """The shop clock's zone as the merchant reads it now ("CET", "UTC"): beside a time without one."""
    return timezone.localtime().tzname() or timezone.get_current_timezone_name()


# For a column's header, which is written once and read on every page: the zone when read.
shop_zone_lazy = lazy(shop_zone, str)


def after(seconds: float) -> str:
    """How long after a start, for small print beside a clock time: "+15 minutes", "+3 seconds"."""
    return "+" + duration(seconds)


WORD = re.compile(r"[^\W\d_]+")  # a run of letters


def sentence_case(text: str) -> str:
    """ "Change Password" -> "Change password", as the shop writes headings (allauth's are title
    case); the first word and an acronym ("API") keep their capitals, spacing stays as it was."""
    seen_first = False

    def word(match: re.Match[str]) -> str:
        nonlocal seen_first
        found = match.group(0)
        if not seen_first or (len(found) > 1 and found.isupper()):
            seen_first = True
            return found
        return found.lower()

    return WORD.sub(word, text)
