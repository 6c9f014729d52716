"""E-mail as it leaves the shop: an HTML part beside the text (the shop's name, logo and colour,
readable with images off), a Message-ID on the shop's own domain, and on optional mail a one-click
unsubscribe (RFC 8058) that mail providers show beside the sender.

Every message's words are written once, as text; the HTML part is that text laid out (paragraphs,
links made clickable, everything escaped), so the two can never say different things.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string
from django.urls import reverse

from shop import identity

UNSUBSCRIBE_SALT = "floodgate.reminders.unsubscribe"
UNSUBSCRIBE_DAYS = 400  # a link in an old reminder still works for a year and a bit


def _base() -> str:
    return settings.PUBLIC_BASE_URL.rstrip("/")


def message_id(key: str) -> str:
    """`<key@shop-host>`: a Message-ID on the domain the shop sends for (spam filters check it)."""
    host = urlsplit(settings.PUBLIC_BASE_URL).hostname or "localhost"
    return f"<{key}@{host}>"


def unsubscribe_url(buyer_id: int) -> str:
    token = signing.TimestampSigner(salt=UNSUBSCRIBE_SALT).sign(str(buyer_id))
    return _base() + reverse("unsubscribe", args=[token])


def unsubscribing_buyer(token: str) -> int:
    """The buyer a link was made for; signing.BadSignature (incl. expired) for anything else."""
    value = signing.TimestampSigner(salt=UNSUBSCRIBE_SALT).unsign(token, max_age=UNSUBSCRIBE_DAYS * 86400)
    if not value.isdigit():
        raise signing.BadSignature("not a buyer")
    return int(value)


def html_of(body: str, *, subject: str, unsubscribe: str = "") -> str:
    shop = identity.current()
    return render_to_string(
        "email/message.html",
        {
            "shop": shop,
            "subject": subject,
            "paragraphs": [p.strip("\n") for p in body.split("\n\n") if p.strip()],
            "logo": _base() + shop.logo_url if shop.logo_url.startswith("/") else shop.logo_url,
            "accent": shop.accent_colour or "#1f2937",
            "home": _base() + "/",
            "unsubscribe": unsubscribe,
        },
    )


def build(
    *, key: str, to: list[str], subject: str, body: str, unsubscribe_for: int | None = None
) -> EmailMultiAlternatives:
    """The message for `to`: text and HTML, the shop as sender and subject prefix; with
    `unsubscribe_for` (a buyer id) the List-Unsubscribe headers and link of optional mail."""
    headers = {"Message-ID": message_id(key)}
    unsubscribe = unsubscribe_url(unsubscribe_for) if unsubscribe_for is not None else ""
    if unsubscribe:
        headers["List-Unsubscribe"] = f"<{unsubscribe}>"
        headers["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    subject = identity.subject(subject)
    mail = EmailMultiAlternatives(
        from_email=identity.sender(), subject=subject, body=body, to=to, headers=headers
    )
    mail.attach_alternative(html_of(body, subject=subject, unsubscribe=unsubscribe), "text/html")
    return mail
