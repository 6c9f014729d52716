"""Each buyer's language, remembered for what reaches them with no request around: their e-mails."""

from __future__ import annotations

from django.db import connection
from django.utils.translation import get_supported_language_variant

from shop import sql
from shop.models import BuyerLanguage


def remember(buyer_id: int, language: str) -> str:
    """Record the language the buyer uses (one statement; no write when it is the one recorded).
    Returns the shop's code for it ("de" for "de-at"); raises LookupError for one it does not speak."""
    code = get_supported_language_variant(language)
    with connection.cursor() as cursor:
        cursor.execute(sql.REMEMBER_LANGUAGE, {"buyer": buyer_id, "language": code})
    return code


def of(buyer_id: int | None, default: str) -> str:
    """The buyer's recorded language, else `default` (a buyer who never visited since it was recorded)."""
    if buyer_id is None:
        return default
    found = BuyerLanguage.objects.filter(user_id=buyer_id).values_list("language", flat=True).first()
    return found or default
