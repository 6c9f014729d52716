"""The shop's identity (name, logo, colour, seller, address, VAT ID, contact, tax display): what
every page, e-mail, calendar file and payment description says instead of the software's name.

Read with `current()`: a process keeps it for LOCAL_SECONDS, then asks Redis (shared by every
process), then the database row; with Redis away it reads the row, so a page never fails for it.
Written by shop.setup, which drops the cached copies after the commit (`forget`), so other
processes follow within LOCAL_SECONDS.
"""

from __future__ import annotations

import logging
import re
import time
import unicodedata
from contextlib import suppress
from dataclasses import dataclass
from email.utils import formataddr, parseaddr

from django.conf import settings
from django.core.cache import cache
from django.core.files.base import ContentFile
from django.core.files.uploadedfile import UploadedFile
from django.db import DatabaseError
from django_redis.exceptions import ConnectionInterrupted
from redis.exceptions import RedisError

from core.errors import InvalidInput
from shop import pictures
from shop.models import ShopSettings

log = logging.getLogger(__name__)

LOCAL_SECONDS = 5.0
CACHE_KEY = "shop:identity"
CACHE_SECONDS = 300
LOGO_MAX_BYTES = 1024 * 1024
# A card statement shows the account's prefix (at most 10 characters), "* " and this suffix, 22 in
# all (Stripe's statement descriptor rules): 10 fit behind any prefix.
DESCRIPTOR_MAX = 10
DESCRIPTOR_REFUSED = re.compile(r"[^A-Z0-9 .,&+/-]")  # Latin only; never < > \ ' " *


@dataclass(frozen=True)
class Identity:
    name: str
    legal_name: str
    address: str
    contact_email: str
    vat_id: str
    logo_url: str
    accent_colour: str
    support_url: str
    prices_include_tax: bool
    is_set: bool  # False: nobody has entered the identity yet (the admin and check --deploy say so)

    @property
    def address_lines(self) -> list[str]:
        return [line.strip() for line in self.address.splitlines() if line.strip()]

    @property
    def statement_descriptor(self) -> str:
        return statement_descriptor(self.name)


def statement_descriptor(name: str) -> str:
    """The shop's name as a card statement may show it after the account's prefix: Latin capitals,
    digits and a few marks, at most DESCRIPTOR_MAX characters, with a letter; "" when none is left
    (the provider then shows the account's own descriptor alone)."""
    latin = unicodedata.normalize("NFKD", name.upper().replace("ß", "SS"))
    kept = DESCRIPTOR_REFUSED.sub(" ", latin.encode("ascii", "ignore").decode())
    short = " ".join(kept.split())[:DESCRIPTOR_MAX].strip()
    return short if re.search("[A-Z]", short) else ""


_local: tuple[float, dict[str, object] | None] | None = None  # (read at, the row's values or None)


def current() -> Identity:
    """The identity in force; before one is set, SHOP_NAME and PRICES_INCLUDE_TAX (read live)."""
    global _local
    now = time.monotonic()
    if _local is None or now - _local[0] > LOCAL_SECONDS:
        values = _shared()
        if values is _UNREADABLE:
            # Neither Redis nor the database answers (a 500 page): the last known, else the defaults.
            return _identity(_local[1] if _local is not None else None)
        _local = (now, values if isinstance(values, dict) else None)
    return _identity(_local[1])


_UNREADABLE = object()
_NONE = "none"  # cached in Redis for "no row yet", so an unset shop does not query on every miss


def _shared() -> dict[str, object] | object | None:
    try:
        cached = cache.get(CACHE_KEY)
    except (RedisError, ConnectionInterrupted):
        log.warning("shop identity: redis unavailable, reading the database")
        cached, redis_up = None, False
    else:
        redis_up = True
    if isinstance(cached, dict):
        return cached
    if cached == _NONE:
        return None
    try:
        row = ShopSettings.objects.filter(pk=1, configured_at__isnull=False).first()
    except DatabaseError:
        return _UNREADABLE
    values = _values(row) if row is not None else None
    if redis_up:
        with suppress(RedisError, ConnectionInterrupted):  # else the next reader asks the database again
            cache.set(CACHE_KEY, values if values is not None else _NONE, CACHE_SECONDS)
    return values


def _values(row: ShopSettings) -> dict[str, object]:
    return {
        "name": row.name,
        "legal_name": row.legal_name,
        "address": row.address,
        "contact_email": row.contact_email,
        "vat_id": row.vat_id,
        "logo_url": row.logo.url if row.logo else "",
        "accent_colour": row.accent_colour,
        "support_url": row.support_url,
        "prices_include_tax": row.prices_include_tax,
    }


def from_row(row: ShopSettings) -> Identity:
    return _identity(_values(row))


def _identity(values: dict[str, object] | None) -> Identity:
    if values is None:
        return Identity(
            name=settings.SHOP_NAME,
            legal_name="",
            address="",
            contact_email="",
            vat_id="",
            logo_url="",
            accent_colour="",
            support_url="",
            prices_include_tax=settings.PRICES_INCLUDE_TAX,
            is_set=False,
        )
    return Identity(**values, is_set=True)  # type: ignore[arg-type]  # the row's own types, as stored


def forget() -> None:
    """Drop this process's and the shared copy: the next reader reads the row (after a change; tests)."""
    global _local
    _local = None
    try:
        cache.delete(CACHE_KEY)
    except (RedisError, ConnectionInterrupted):
        log.warning("shop identity: redis unavailable, its copy expires by itself")


def subject(text: str) -> str:
    """An e-mail subject with the shop's name in front, as mail clients list it."""
    return f"[{current().name}] {text}"


def sender() -> str:
    """The From header: the shop's name shown, DEFAULT_FROM_EMAIL's address."""
    return formataddr((current().name, parseaddr(settings.DEFAULT_FROM_EMAIL)[1]))


def cleaned_logo(upload: UploadedFile[bytes]) -> ContentFile[bytes]:
    """A logo kept as a picture (PNG, JPEG or WebP by content, re-encoded); InvalidInput otherwise."""
    if upload.size is not None and upload.size > LOGO_MAX_BYTES:
        raise InvalidInput("The logo is larger than 1 MB; save a smaller one (PNG, JPEG or WebP).")
    return pictures.cleaned(upload)
