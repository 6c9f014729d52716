"""How money, times, durations, counts and seats read to a person: the one place pages and e-mails
format them.

Money follows the buyer's locale (Babel's CLDR data): 12900 EUR is "€129.00" in English,
"129,00 €" in German. Words are English, as the rest of the shop is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache

from babel import Locale, UnknownLocaleError
from babel.numbers import format_currency, get_currency_precision
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


def money(amount_minor: int, currency: str, locale: str = DEFAULT_LOCALE) -> str:
    """12900, "EUR" -> "€129.00" (en), "129,00 €" (de); the currency's own number of decimals."""
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


def plural(count: int, one: str, many: str | None = None) -> str:
    """1, "unit" -> "1 unit"; 2 -> "2 units"; thousands grouped ("1,200 units")."""
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def units(count: int) -> str:
    return plural(count, "unit")


def duration(seconds: float) -> str:
    """480 -> "8 minutes"; 90 -> "1 minute 30 seconds"; 3600 -> "1 hour"; 45 -> "45 seconds"."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    parts = []
    if hours:
        parts.append(plural(hours, "hour"))
    if minutes:
        parts.append(plural(minutes, "minute"))
    if secs and not hours:
        parts.append(plural(secs, "second"))
    return " ".join(parts) or "0 seconds"


def seats(labels: Iterable[str]) -> str:
    """["B14", "A2"] -> "seats A2, B14"; one -> "seat B14"; none -> ""."""
    ordered = sorted(labels)
    if not ordered:
        return ""
    return ("seat " if len(ordered) == 1 else "seats ") + ", ".join(ordered)


def moment(when: datetime) -> str:
    """A time for an e-mail (no script there adds the reader's own clock): "Fri 4 Dec 2026, 18:00 UTC"."""
    return when.astimezone(UTC).strftime("%a %-d %b %Y, %H:%M UTC")


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
