"""Money, durations, counts and seats as a buyer reads them (core.formatting)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from core import formatting


@pytest.mark.parametrize(
    ("amount", "currency", "locale", "shown"),
    [
        (12900, "EUR", "en", "€129.00"),
        (12900, "EUR", "en_US", "€129.00"),
        (12900, "EUR", "de_DE", "129,00\xa0€"),
        (123456, "USD", "en_US", "$1,234.56"),
        (1000, "JPY", "en", "¥1,000"),  # no minor unit: 1000 is a thousand yen
        (12900, "EUR", "xx_YY", "€129.00"),
    ],
)
def test_money_in_the_buyers_locale(amount: int, currency: str, locale: str, shown: str) -> None:
    assert formatting.money(amount, currency, locale) == shown


@pytest.mark.parametrize(
    ("header", "locale"),
    [
        ("de-AT,de;q=0.9,en;q=0.5", "de_AT"),
        ("en-US", "en_US"),
        ("xx-YY, fr;q=0.5", "fr"),
        ("", "en"),
        ("*", "en"),
    ],
)
def test_locale_from_the_accept_language_header(header: str, locale: str) -> None:
    assert formatting.locale_from_header(header) == locale


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (480, "8 minutes"),
        (60, "1 minute"),
        (90, "1 minute 30 seconds"),
        (45, "45 seconds"),
        (3600, "1 hour"),
        (3660, "1 hour 1 minute"),
        (0, "0 seconds"),
    ],
)
def test_durations_in_words(seconds: int, words: str) -> None:
    assert formatting.duration(seconds) == words


def test_counts_and_seats() -> None:
    assert (formatting.units(1), formatting.units(2), formatting.units(1200)) == (
        "1 unit",
        "2 units",
        "1,200 units",
    )
    assert formatting.seats(["B14"]) == "seat B14"
    assert formatting.seats(["B14", "A2"]) == "seats A2, B14"
    assert formatting.seats([]) == ""


@pytest.mark.parametrize(
    ("heading", "shown"),
    [
        ("Change Password", "Change password"),
        ("Verify Your Email Address", "Verify your email address"),
        ("API Tokens", "API tokens"),
        ("Sign In", "Sign in"),
        ("Log in", "Log in"),
        ("\n    Password Reset\n", "\n    Password reset\n"),  # as a template's block gives it
        ("Sign-In Code", "Sign-in code"),
        ("", ""),
    ],
)
def test_headings_in_sentence_case(heading: str, shown: str) -> None:
    assert formatting.sentence_case(heading) == shown


def test_a_moment_for_an_email_in_utc() -> None:
    berlin = datetime(2026, 12, 4, 19, 0, tzinfo=ZoneInfo("Europe/Berlin"))
    assert formatting.moment(berlin) == "Fri 4 Dec 2026, 18:00 UTC"
