"""Nothing English left on what a German buyer reads: the pages, every e-mail (text and HTML), the
.ics and the invoice and credit note, read in German and scanned two ways.

- Catalogued words left in English: every phrase of three words or more of an English msgid whose
  German differs must not appear verbatim (a string translated at import time, a template without
  {% translate %} of a known sentence, a missing activation).
- Words never marked for translation: English function words ("the", "your", "please", ...) that
  German does not use, anywhere in the visible text (a new sentence nobody wrapped in gettext).

Each scan has its control: an English string planted in one page is found.
"""

from __future__ import annotations

import html
import io
import re
from datetime import timedelta
from functools import cache
from pathlib import Path

import pytest
from babel.messages.pofile import read_po
from django.core import mail
from django.test import Client, TestCase
from django.utils import timezone, translation
from pypdf import PdfReader

from checkout import failures, invoices, outbox, refunds
from checkout.models import Invoice, Order, OutboxMessage, Reminder
from holds.models import Hold
from shop import languages, setup
from tests.checkout.helpers import accepted
from tests.checkout.helpers import confirmed_order as paid_order
from tests.factories import confirmed_order, make_buyer, make_drop

pytestmark = pytest.mark.django_db

CATALOGUE = Path(__file__).resolve().parents[2] / "locale" / "de" / "LC_MESSAGES" / "django.po"
# English words German does not use ("was" and "in" it does), as whole words; the shop's data
# below has none of them.
ENGLISH = re.compile(
    r"\b(the|your|you|please|with|this|and|of|to|is|are|will|not|here|has|have|our|"
    r"we|when|now|sold|back|order|orders|buy|paid|held|refund|refunded|hold)\b",
    re.IGNORECASE,
)
# Placeholders and markup split a msgid into the literal phrases a page would show.
PLACEHOLDER = re.compile(r"%\(\w+\)[sd]|%[sd]|\{\{.*?\}\}|\{\w*\}|<[^>]*>|&\w+;")
VISIBLE_ATTRIBUTE = re.compile(r'\b(?:aria-label|title|placeholder|alt)="([^"]*)"')
URL = re.compile(r"https?://\S+|mailto:\S+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|/[\w/.?=&%-]*")


def visible(page: str) -> str:
    """What a reader of an HTML page sees or hears: its text and labelling attributes, no URLs."""
    page = re.sub(r"(?is)<(script|style)\b.*?</\1>|<!--.*?-->", " ", page)
    labels = " ".join(VISIBLE_ATTRIBUTE.findall(page))
    text = html.unescape(re.sub(r"<[^>]+>", " ", page) + " " + labels)
    return " ".join(URL.sub(" ", text).split())


def plain(text: str) -> str:
    return " ".join(URL.sub(" ", text).split())


def words_of(answer: object) -> str:
    """The person-readable strings of a JSON answer (`detail`, `failure_reason`, field messages)."""
    if isinstance(answer, dict):
        return " ".join(
            value if isinstance(value, str) and key in {"detail", "failure_reason"} else words_of(value)
            for key, value in answer.items()
        )
    if isinstance(answer, list):
        return " ".join(words_of(value) for value in answer)
    return ""


def calendar_text(ics: str) -> str:
    """What a calendar shows of an .ics: its SUMMARY and DESCRIPTION values (not PRODID or UID)."""
    unfolded = ics.replace("\r\n ", "").replace("\r\n\t", "")
    shown = [
        re.sub(r"\\([\\;,])", r"\1", value).replace("\\n", " ")
        for name, value in re.findall(r"(?m)^(SUMMARY|DESCRIPTION|LOCATION)[^:]*:(.*?)\r?$", unfolded)
    ]
    return plain(" ".join(shown))


@cache
def english_phrases() -> list[str]:
    """The literal phrases (three words or more) of every msgid whose German says something else."""
    with CATALOGUE.open("rb") as handle:
        catalogue = read_po(handle, locale="de")
    phrases = set()
    for message in catalogue:
        if not message.id or not message.string:
            continue
        ids = message.id if isinstance(message.id, tuple | list) else (message.id,)
        strings = message.string if isinstance(message.string, tuple | list) else (message.string,)
        german = " ".join(" ".join(strings).split())
        for msgid in ids:
            for part in PLACEHOLDER.split(msgid):
                phrase = " ".join(part.strip(" .,:;!?()\"'·—-").split())
                if len(phrase.split()) >= 3 and phrase not in german:
                    phrases.add(phrase)
    return sorted(phrases)


def pdf_text(pdf: bytes) -> str:
    return plain("\n".join(page.extract_text() for page in PdfReader(io.BytesIO(pdf)).pages))


def what_a_german_buyer_reads() -> dict[str, str]:
    """Every page, e-mail, .ics and invoice of a German buyer, as the text they read, by name."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        setup.configure(
            name="Kiez Kicks",
            legal_name="Kiez Kicks UG",
            address="Reeperbahn 2\n20359 Hamburg",
            contact_email="moin@kiez.example",
            vat_id="DE999888777",
        )
    drop = make_drop(
        slug="nachtzug", quantity=9, price_minor=12900, product_name="Nachtzug", title="Nachtzug"
    )
    later = make_drop(
        slug="morgen",
        quantity=5,
        starts_at=timezone.now() + timedelta(days=1),
        title="Morgen",
        waiting_room=True,
    )
    buyer = make_buyer("greta")
    languages.remember(buyer.pk, "de")
    order = confirmed_order(drop, buyer, key="k1", amount_minor=12900)
    failed = confirmed_order(drop, buyer, key="k3", amount_minor=12900)
    Order.objects.filter(pk=failed.pk).update(state="failed", failure_reason=failures.TOO_LATE)
    holder = make_buyer("hanna")
    client = Client(HTTP_ACCEPT_LANGUAGE="de")
    client.force_login(holder)
    client.post("/drops/nachtzug/buy", {"quantity": "1", "idempotency_key": "k2"})
    hold = Hold.objects.get(buyer=holder)
    mine = Client(HTTP_ACCEPT_LANGUAGE="de")
    mine.force_login(buyer)

    read: dict[str, str] = {}
    anyone = Client(HTTP_ACCEPT_LANGUAGE="de")
    for path in [
        "/",
        "/drops/nachtzug/",
        "/drops/morgen/",
        "/terms/",
        "/nowhere/",
        "/accounts/login/",
        "/accounts/signup/",
        "/accounts/password/reset/",
        *(f"/legal/{kind}/" for kind in ("terms", "privacy", "notice", "withdrawal")),
    ]:
        read[f"page {path}"] = visible(anyone.get(path).content.decode())
    read["page hold"] = visible(client.get(f"/holds/{hold.pk}/").content.decode())
    read["page orders"] = visible(mine.get("/orders/").content.decode())
    read["page order"] = visible(mine.get(f"/orders/{order.pk}/").content.decode())
    read["page failed order"] = visible(mine.get(f"/orders/{failed.pk}/").content.decode())
    # the API's words: its refusals' details and a failed order's reason, in the request's language
    api = Client(HTTP_ACCEPT_LANGUAGE="de")
    api.force_login(holder)
    answers = [
        Client(HTTP_ACCEPT_LANGUAGE="de").get("/api/me"),
        api.get("/api/drops/no-such-drop"),
        api.post("/api/drops/nachtzug/holds", {"quantity": 1}, content_type="application/json"),
        api.post(
            "/api/drops/nachtzug/holds",
            {"quantity": 99},
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY="k9",
        ),
        api.post(
            "/api/drops/morgen/holds",
            {"quantity": 1},
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY="k8",
        ),
        mine.get(f"/api/orders/{failed.pk}"),
    ]
    assert all(answer.status_code != 500 for answer in answers)
    read["api"] = plain(" ".join(words_of(answer.json()) for answer in answers))
    assert len(read["api"].split()) > 20, read["api"]
    read["ics"] = calendar_text(anyone.get(f"/drops/{later.slug}/calendar.ics").content.decode())
    assert "Morgen" in read["ics"]

    # every e-mail a buyer gets, in the language they shopped in
    paid = paid_order(make_drop(slug="stiefel", quantity=2, title="Stiefel"), quantity=1)
    languages.remember(paid.buyer_id, "de")
    refund = refunds.request_refund(order_id=paid.pk, by=None).refund
    accepted(refund)
    outbox.announce_late_void(order)
    outbox.announce_cancel(order, by_shop=True, reason="")
    reminder = Reminder.objects.create(drop=later, buyer=buyer)
    OutboxMessage.objects.create(
        topic=outbox.REMINDER_TOPIC, key="r1", payload={"reminder": reminder.pk, "buyer": buyer.pk}
    )
    for result in ("lost", "won"):
        OutboxMessage.objects.create(
            topic=outbox.RAFFLE_TOPIC,
            key=f"f-{result}",
            payload={"drop": drop.pk, "buyer": buyer.pk, "result": result, "hold": hold.pk},
        )
    outbox.relay_outbox()
    # allauth's own: the sign-up's confirmation and a password reset, asked for in German
    password = "a long pass phrase"
    anyone.post(
        "/accounts/signup/", {"email": "neu@example.com", "password1": password, "password2": password}
    )
    anyone.post("/accounts/password/reset/", {"email": "greta@example.com"})
    for n, message in enumerate(mail.outbox):
        parts = [str(message.subject), str(message.body)]
        parts += [visible(str(content)) for content, _type in getattr(message, "alternatives", [])]
        parts += [calendar_text(str(c)) for name, c, _type in message.attachments if name.endswith(".ics")]
        parts += [pdf_text(content) for name, content, _type in message.attachments if name.endswith(".pdf")]
        read[f"mail {n} {message.subject}"] = plain("\n".join(parts))
    with translation.override("de"):
        for invoice in Invoice.objects.all():
            read[f"pdf {invoice.number_text}"] = pdf_text(invoices.pdf(invoice))
    assert refund is not None and Invoice.objects.filter(kind="credit_note").exists()
    assert len(mail.outbox) >= 11, [m.subject for m in mail.outbox]
    return read


def left_in_english(read: dict[str, str]) -> dict[str, list[str]]:
    """Each text's English: catalogued phrases verbatim, and function words German does not use."""
    found: dict[str, list[str]] = {}
    for name, text in read.items():
        hits = [phrase for phrase in english_phrases() if phrase in text]
        hits += [f"…{text[max(0, m.start() - 30) : m.end() + 30]}…" for m in ENGLISH.finditer(text)]
        if hits:
            found[name] = hits
    return found


def test_a_german_buyer_reads_no_english() -> None:
    read = what_a_german_buyer_reads()

    assert len(read) >= 25, sorted(read)
    found = left_in_english(read)
    assert found == {}, "\n".join(f"{name}: {hits}" for name, hits in found.items())


def test_control_english_planted_in_a_page_is_found() -> None:
    read = what_a_german_buyer_reads()
    # a msgid's phrase, untranslated
    catalogued = next(p for p in english_phrases() if p.startswith("The waiting room opens an hour"))
    read["page /"] += " Der Shop. " + catalogued
    read["ics"] += " Kiez Kicks: check your ticket"  # a sentence nobody marked for translation

    # and a whole page in English, as a German buyer would get it if the language were lost
    read["page drop in English"] = visible(Client().get("/drops/nachtzug/").content.decode())

    found = left_in_english(read)

    assert catalogued in found["page /"]
    assert any("your ticket" in hit for hit in found["ics"])
    assert "Log in to buy" in found["page drop in English"]
    assert any(hit.startswith("…") for hit in found["page drop in English"])  # the word scan too
    assert set(found) == {"page /", "ics", "page drop in English"}
