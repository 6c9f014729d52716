"""The shop's legal pages (terms, privacy, legal notice, returns and withdrawal), one text per page
and language, written by the merchant. Each starts as a template filled from the identity
(templates/shop/legal/<kind>.<language>.txt): a starting point, not legal advice.

A text is plain text, shown escaped: a blank line starts a paragraph, "## " a heading. Nothing a
merchant pastes (a <script>, an on*= attribute) reaches a buyer as markup.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from django.conf import settings
from django.template.loader import render_to_string
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language

from shop.models import LegalKind, LegalText

if TYPE_CHECKING:
    from shop.identity import Identity

PARAGRAPH = re.compile(r"\n[ \t]*\n+")


def template_text(kind: str, language: str, *, identity: Identity) -> str:
    """The starting text of a page in a language, filled from the identity."""
    return render_to_string(f"shop/legal/{kind}.{language}.txt", {"shop": identity}).strip() + "\n"


def seed(*, identity: Identity) -> int:
    """Write the template of every page and language the merchant has not written yet (after the
    shop's row is saved); how many."""
    have = set(LegalText.objects.values_list("kind", "language"))
    missing = [
        LegalText(shop_id=1, kind=kind, language=code, body=template_text(kind, code, identity=identity))
        for kind in LegalKind.values
        for code, _name in settings.LANGUAGES
        if (kind, code) not in have
    ]
    LegalText.objects.bulk_create(missing, ignore_conflicts=True)  # a concurrent seed wrote it: theirs stays
    return len(missing)


def text_for(kind: str, *, identity: Identity, language: str | None = None) -> str:
    """The page in the reader's language, else the shop's, else the template in the reader's."""
    language = (language or get_language() or settings.LANGUAGE_CODE)[:2]
    bodies = dict(
        LegalText.objects.filter(kind=kind, language__in=[language, settings.LANGUAGE_CODE]).values_list(
            "language", "body"
        )
    )
    body = bodies.get(language) or bodies.get(settings.LANGUAGE_CODE)
    if body:
        return body
    known = {code for code, _name in settings.LANGUAGES}
    return template_text(kind, language if language in known else settings.LANGUAGE_CODE, identity=identity)


def html(text: str) -> SafeString:
    """Plain text as paragraphs and headings, every character of it escaped."""
    blocks = [block.strip("\n") for block in PARAGRAPH.split(text.replace("\r\n", "\n").strip())]
    parts = []
    for block in blocks:
        lines = block.split("\n")
        if lines[0].startswith("## "):  # a heading, and the lines under it a paragraph
            parts.append(format_html("<h2>{}</h2>", lines.pop(0)[3:].strip()))
        if lines:
            shown = format_html_join(mark_safe("<br>\n"), "{}", ((line,) for line in lines))
            parts.append(format_html("<p>{}</p>", shown))
    return mark_safe("\n".join(parts))  # each part came from format_html: escaped
