"""The shop's Web Push identity (VAPID, RFC 8292) from the settings: whether push is on, the key
that signs, the public half the browsers subscribe with, the contact the push services are given.

Free of models, so the deploy checks (ops/checks.py) can read it before Django's apps load.
"""

from __future__ import annotations

import base64
import functools
from email.utils import parseaddr

from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.conf import settings
from py_vapid import Vapid02


def enabled() -> bool:
    return bool(settings.WEB_PUSH_VAPID_KEY)


def vapid() -> Vapid02:
    """The shop's VAPID key (RFC 8292) from WEB_PUSH_VAPID_KEY: the raw P-256 private key, base64url."""
    return Vapid02.from_raw(settings.WEB_PUSH_VAPID_KEY.strip().encode())


def public_key() -> str:
    """The page's applicationServerKey: the uncompressed public point, base64url without padding."""
    return _public_half(settings.WEB_PUSH_VAPID_KEY)


@functools.lru_cache(maxsize=4)
def _public_half(private: str) -> str:
    # derived once per key: every waiting page shows it
    point = Vapid02.from_raw(private.strip().encode()).public_key.public_bytes(
        Encoding.X962, PublicFormat.UncompressedPoint
    )
    return base64.urlsafe_b64encode(point).rstrip(b"=").decode()


def subject() -> str:
    """Who the push services may write to about the shop's pushes (VAPID's `sub`, mailto: or https:):
    WEB_PUSH_SUBJECT, else an https PUBLIC_BASE_URL, else the shop's sender address."""
    if settings.WEB_PUSH_SUBJECT:
        return str(settings.WEB_PUSH_SUBJECT)
    if settings.PUBLIC_BASE_URL.startswith("https://"):
        return str(settings.PUBLIC_BASE_URL.rstrip("/"))
    return "mailto:" + parseaddr(settings.DEFAULT_FROM_EMAIL)[1]
