"""The shop in the buyer's language: no buyer-facing words outside the translation tags, a complete
German catalogue compiled from its .po, and the pages in German for a German browser or switcher."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core import mail
from django.template.base import Lexer, TokenType
from django.test import Client
from django.utils import translation

from admission import services as admission
from checkout import outbox
from devtools import po
from holds import services as holds
from tests.factories import confirmed_order, make_buyer, make_drop

TEMPLATES = Path(settings.BASE_DIR) / "templates"
# The merchant's own pages (the admin) are not the buyer's; allauth's element templates hold no words.
# The legal pages' starting texts are written once per language (shop/legal/<kind>.<language>.txt).
NOT_BUYERS = ("admin/", "shop/legal/")
# Words that read the same in every language: the shop's name, the time zone, an acronym.
SAME_EVERYWHERE = {"Floodgate", "UTC", "API"}
VISIBLE_ATTRIBUTES = re.compile(
    r"""\b(?:title|alt|aria-label|placeholder|data-done|data-say-[\w-]+)\s*=\s*"([^"]*)\"""", re.I
)
WORD = re.compile(r"[^\W\d_]{2,}")


def buyer_templates() -> list[Path]:
    found = [*TEMPLATES.rglob("*.html"), *TEMPLATES.rglob("*.txt")]
    return sorted(p for p in found if not str(p.relative_to(TEMPLATES)).startswith(NOT_BUYERS))


def untranslated(source: str, *, text_template: bool = False) -> list[str]:
    """The words of a template a person would read that no {% translate %} or {% blocktranslate %}
    covers: text between tags, and the values of attributes that are shown (title, alt, ...)."""
    parts, skipping = [], 0
    for token in Lexer(source).tokenize():
        if token.token_type == TokenType.BLOCK:
            name = token.contents.split()[0]
            if name in {"blocktranslate", "blocktrans", "comment"}:
                skipping += 1
            elif name in {"endblocktranslate", "endblocktrans", "endcomment"}:
                skipping -= 1
            parts.append("\x00")  # a tag or variable: its output is not the template's own text
        elif token.token_type == TokenType.TEXT and not skipping:
            parts.append(token.contents)
        else:
            parts.append("\x00")
    text = "".join(parts)
    words: list[str] = []
    if not text_template:
        # Scripts say nothing of their own (their words come in data- attributes); markup is not text.
        text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S | re.I)
        text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
        for value in VISIBLE_ATTRIBUTES.findall(text):
            words += WORD.findall(value)
        text = re.sub(r'[\w-]+\s*=\s*"[^"]*"', " ", text)  # attributes, also of a partial's own
        text = re.sub(r"<[^>]*>", " ", text)
        text = text.replace("&nbsp;", " ")
    words += WORD.findall(text)
    return [w for w in words if w not in SAME_EVERYWHERE]


def test_the_scan_catches_a_bare_english_word() -> None:
    # the control: words the scan must see, whether in the text, a shown attribute or an e-mail
    assert untranslated("{% load i18n %}<p>Hello</p>") == ["Hello"]
    assert untranslated('<button title="Close">{% translate "x" %}</button>') == ["Close"]
    assert untranslated("{{ total }} paid", text_template=True) == ["paid"]
    assert untranslated("<p>{% blocktranslate %}Fine {{ x }}{% endblocktranslate %} but this</p>") == [
        "but",
        "this",
    ]
    # and what it must not count: translated words, markup, scripts, the shop's name
    assert untranslated('{% load i18n %}<a class="button" href="/x">{% translate "Go" %}</a>') == []
    assert untranslated('<script nonce="n">var a = "b";</script><span>Floodgate · UTC</span>') == []


@pytest.mark.parametrize(
    "path", buyer_templates(), ids=lambda p: str(p.relative_to(TEMPLATES)) if isinstance(p, Path) else p
)
def test_every_word_a_buyer_reads_is_translatable(path: Path) -> None:
    left = untranslated(path.read_text(), text_template=path.suffix == ".txt")
    assert not left, f"{path.relative_to(TEMPLATES)}: outside {{% translate %}}: {left}"


def test_the_german_catalogue_is_complete_and_compiled() -> None:
    catalogues = po.catalogs()
    assert [p.parent.parent.name for p in catalogues] == ["de"]
    assert {code for code, _name in settings.LANGUAGES} == {"en", "de"}
    for catalogue in catalogues:
        assert po.problems(catalogue) == []
        assert len(list(po.read(catalogue))) > 300


def test_a_stale_or_incomplete_catalogue_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "de" / "LC_MESSAGES"
    folder.mkdir(parents=True)
    source = folder / "django.po"
    source.write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=utf-8\\n"\n\n'
        'msgid "Reserve"\nmsgstr "Reservieren"\n\n'
        '#, fuzzy\nmsgid "Pay"\nmsgstr "Zahlen"\n\n'
        'msgid "Release"\nmsgstr ""\n'
    )
    found = po.problems(source)
    assert any("fuzzy: 'Pay'" in p for p in found)
    assert any("untranslated: 'Release'" in p for p in found)
    assert any("not compiled" in p for p in found)
    source.with_suffix(".mo").write_bytes(po.compiled(source))
    assert not any("not compiled" in p for p in po.problems(source))
    assert po.compiled(source) == po.compiled(source)  # deterministic: the committed file can be checked


def german(client: Client, url: str) -> str:
    answer = client.get(url, HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9,en;q=0.5")
    assert answer.status_code == 200, (url, answer.status_code)
    assert answer["Content-Language"] == "de"
    return answer.content.decode()


@pytest.mark.django_db
def test_a_german_browser_gets_german_pages() -> None:
    drop = make_drop(slug="de-drop", quantity=10, price_minor=12900, hold_seconds=480)
    buyer = make_buyer("dora")
    client = Client()

    page = german(client, "/drops/de-drop/")
    assert '<html lang="de">' in page
    assert "Zum Kaufen anmelden" in page and "Log in to buy" not in page
    assert "8 Minuten nach der Reservierung" in page and "once reserved" not in page
    assert "10 von 10 Stück" in page and "129,00\xa0€" in page
    assert "Verkaufsbedingungen" in page and "Terms of sale" not in page

    page = german(client, "/accounts/login/")
    assert "Passwort vergessen?" in page and "Forgot your password?" not in page
    assert "E-Mail oder Benutzername" in page

    client.force_login(buyer)
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=2, idempotency_key="de-1").hold
    page = german(client, f"/holds/{hold.pk}/")
    assert "Es gehört Ihnen noch" in page and "It's yours for" not in page
    assert "Zahlungspflichtig bestellen · 258,00\xa0€" in page and "Freigeben" in page
    page = german(client, "/drops/de-drop/")
    assert "Sie haben 2 Stück reserviert." in page and "You hold" not in page
    others = (("/orders/", "Noch keine Bestellungen"), ("/accounts/api/", "Sie haben kein API-Token."))
    for url, word in others:
        page = german(client, url)
        assert word in page and "Your orders" not in page


@pytest.mark.django_db
def test_a_german_browser_is_told_why_a_page_is_not_there_in_german() -> None:
    make_drop(slug="no-room", quantity=1)
    client = Client()
    client.force_login(make_buyer("nina"))
    said = {
        "/orders/999999/": "Unter Ihren Bestellungen gibt es keine solche.",
        "/checkout/stripe/pi_none": "Unter Ihren Zahlungen gibt es keine solche.",
        "/drops/no-room/queue/verify": "Dieser Drop hat keinen Warteraum.",
        "/media/products/notes.txt": "Hier gibt es nur Produktbilder (JPEG, PNG, WebP).",
    }
    for url, words in said.items():
        answer = client.get(url, HTTP_ACCEPT_LANGUAGE="de")
        page = answer.content.decode()
        assert answer.status_code == 404, url
        assert words in page and "There is no" not in page and "has no waiting room" not in page, url


@pytest.mark.django_db
def test_english_stays_the_default_and_the_switcher_changes_the_language() -> None:
    make_drop(slug="switch", quantity=5)
    client = Client()
    page = client.get("/drops/switch/", HTTP_ACCEPT_LANGUAGE="fr-FR,fr").content.decode()
    assert '<html lang="en">' in page and "Log in to buy" in page
    assert 'action="/i18n/setlang/"' in page and 'value="de"' in page and "Deutsch" in page

    answer = client.post("/i18n/setlang/", {"language": "de", "next": "/drops/switch/"})
    assert answer.status_code == 302 and answer["Location"] == "/drops/switch/"
    cookie = answer.cookies[settings.LANGUAGE_COOKIE_NAME]
    assert cookie.value == "de" and cookie["samesite"] == "Lax"
    page = client.get("/drops/switch/", HTTP_ACCEPT_LANGUAGE="en-US").content.decode()
    assert "Zum Kaufen anmelden" in page  # the buyer's choice beats the browser's

    client.post("/i18n/setlang/", {"language": "en", "next": "/drops/switch/"})
    assert "Log in to buy" in client.get("/drops/switch/").content.decode()
    # a language the shop does not speak, or a foreign next: refused without changing anything
    answer = client.post("/i18n/setlang/", {"language": "xx", "next": "https://evil.example/"})
    assert answer.status_code == 302 and answer["Location"] == "/"
    assert client.cookies[settings.LANGUAGE_COOKIE_NAME].value == "en"


@pytest.mark.django_db
def test_a_german_shop_writes_its_e_mails_in_german() -> None:
    drop = make_drop(slug="de-mail", quantity=5, price_minor=4900)
    buyer = make_buyer("dieter")
    order = confirmed_order(drop, buyer, key="m", amount_minor=9800, quantity=2)
    with translation.override("de"):  # the relaying worker's language: LANGUAGE_CODE = "de"
        outbox.relay_outbox()
    sent = mail.outbox[0]
    assert sent.subject == f"[Floodgate] Ihre Bestellung {order.pk} ist bestätigt: {drop.display_title}"
    assert sent.body.startswith("Guten Tag,\n")
    assert f"Ihre Bestellung {order.pk} ist bestätigt: 2 Stück {drop.display_title}." in sent.body
    assert "Bezahlt insgesamt: 98,00\xa0€" in sent.body and "Total paid" not in sent.body
    mail.outbox.clear()
    outbox.relay_outbox()  # nothing twice, in any language
    assert mail.outbox == []


@pytest.mark.django_db
def test_the_waiting_room_speaks_german_with_buyers_ahead() -> None:
    drop = make_drop(slug="de-line", quantity=2, waiting_room=True, admission_percent=100)
    for name in ("erste", "zweite", "dritte"):
        admission.join(drop=drop, buyer_id=make_buyer(name).pk)
    client = Client()
    client.force_login(make_buyer("vierte"))
    admission.join(drop=drop, buyer_id=User.objects.get(username="vierte").pk)
    page = german(client, "/drops/de-line/queue/")
    assert "Warteraum" in page and "Waiting room" not in page
    matched = re.search(r'<script id="queue-words"[^>]*>(.*?)</script>', page, re.S)
    assert matched
    words = json.loads(matched.group(1))
    assert words["unit"] == ["{n} Stück", "{n} Stück"] and words["lang"] == "de"
    assert words["people"] == ["{n} Person vor Ihnen", "{n} Personen vor Ihnen"]
