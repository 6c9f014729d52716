"""What a buyer reads names the merchant's shop, never the software: pages, e-mails, the .ics and
the payment description (with a control that plants the software's name and sees it found); the
legal pages, their links in every footer and before the order button; merchant text shown inert."""

from __future__ import annotations

import io
import re
from datetime import timedelta

import httpx
import pytest
from django.core import mail
from django.core.management import call_command
from django.test import Client, TestCase
from django.utils import timezone

from checkout import outbox, services
from checkout.models import OutboxMessage, Refund, Reminder
from holds.models import Hold
from shop.models import LegalText
from tests.factories import confirmed_order, make_buyer, make_drop

pytestmark = pytest.mark.django_db

SOFTWARE = "Floodgate"


def set_identity() -> None:
    with TestCase.captureOnCommitCallbacks(execute=True):
        call_command(
            "configure_shop",
            "--name", "Harbour Lane Sneakers",
            "--legal-name", "Harbour Lane GmbH",
            "--address", r"Hafenstraße 1\n20457 Hamburg",
            "--contact-email", "hello@harbour-lane.example",
            "--vat-id", "DE123456789",
            stdout=io.StringIO(),
        )  # fmt: skip


def everything_a_buyer_reads() -> dict[str, str]:
    """Every buyer page (English and German), e-mail (sender, subject, body, attachments), the
    .ics and the payment description, by name."""
    drop = make_drop(slug="runner", quantity=5, price_minor=12900, product_name="Runner", title="Runner")
    later = make_drop(slug="later", quantity=5, starts_at=timezone.now() + timedelta(days=1), title="Later")
    buyer = make_buyer("ada")
    order = confirmed_order(drop, buyer, key="k1", amount_minor=12900)
    holder = make_buyer("bea")
    client = Client()
    client.force_login(holder)
    client.post("/drops/runner/buy", {"quantity": "1", "idempotency_key": "k2"})
    hold = Hold.objects.get(buyer=holder)
    mine = Client()
    mine.force_login(buyer)

    read: dict[str, str] = {}
    paths = [
        "/",
        "/drops/runner/",
        "/terms/",
        "/nowhere/",
        "/accounts/login/",
        "/accounts/signup/",
        "/docs/api/",
    ]
    paths += [f"/legal/{kind}/" for kind in ("terms", "privacy", "notice", "withdrawal")]
    for language in ("en", "de"):
        for path in paths:
            read[f"page {path} {language}"] = (
                Client().get(path, HTTP_ACCEPT_LANGUAGE=language).content.decode()
            )
        read[f"page hold {language}"] = client.get(
            f"/holds/{hold.pk}/", HTTP_ACCEPT_LANGUAGE=language
        ).content.decode()
        read[f"page orders {language}"] = mine.get("/orders/", HTTP_ACCEPT_LANGUAGE=language).content.decode()
        read[f"page order {language}"] = mine.get(
            f"/orders/{order.pk}/", HTTP_ACCEPT_LANGUAGE=language
        ).content.decode()
    read["ics"] = Client().get(f"/drops/{later.slug}/calendar.ics").content.decode()
    read["payment description"] = services._description(order)

    # every e-mail a buyer gets: confirmation, late void, cancel, reminder (+ .ics), raffle, refund, sign-up
    outbox.announce_late_void(order)
    outbox.announce_cancel(order)
    reminder = Reminder.objects.create(drop=later, buyer=buyer)
    OutboxMessage.objects.create(
        topic=outbox.REMINDER_TOPIC, key="r1", payload={"reminder": reminder.pk, "buyer": buyer.pk}
    )
    OutboxMessage.objects.create(
        topic=outbox.RAFFLE_TOPIC, key="f1", payload={"drop": drop.pk, "buyer": buyer.pk, "result": "lost"}
    )
    outbox.relay_outbox()
    Client().post(
        "/accounts/signup/",
        {"email": "new@example.com", "password1": "a long pass phrase", "password2": "a long pass phrase"},
    )
    for n, message in enumerate(mail.outbox):
        parts = [message.from_email, str(message.subject), str(message.body)]
        parts += [str(content) for _name, content, _type in message.attachments]
        parts += [str(content) for content, _type in getattr(message, "alternatives", [])]
        read[f"mail {n} {message.subject}"] = "\n".join(parts)
    read["mail refund body"] = outbox.refund_text(
        Refund(order=order, quantity=1, amount_minor=12900, currency="EUR")
    )
    assert len(mail.outbox) >= 6, [m.subject for m in mail.outbox]
    return read


def naming_the_software(read: dict[str, str]) -> list[str]:
    return sorted(name for name, text in read.items() if SOFTWARE in text)


def test_nothing_a_buyer_reads_names_the_software_once_the_shop_has_an_identity() -> None:
    set_identity()

    read = everything_a_buyer_reads()

    assert naming_the_software(read) == []
    assert "Harbour Lane Sneakers" in read["page / en"] and "Harbour Lane Sneakers" in read["ics"]
    assert read["payment description"].startswith("Harbour Lane Sneakers order ")
    sender = next(text for name, text in read.items() if name.startswith("mail 0"))
    assert sender.startswith("Harbour Lane Sneakers <") and "[Harbour Lane Sneakers] " in sender


def test_control_the_scan_finds_the_software_name_where_it_is_planted(settings) -> None:
    # No identity: every page, e-mail, .ics and description says SHOP_NAME, planted as the software's.
    settings.SHOP_NAME = SOFTWARE

    read = everything_a_buyer_reads()

    assert naming_the_software(read) == sorted(read)


def test_every_footer_links_the_legal_pages_and_the_hold_page_shows_terms_before_the_order_button() -> None:
    set_identity()
    make_drop(slug="legal", quantity=3)
    buyer = make_buyer("lia")
    client = Client()
    client.force_login(buyer)
    client.post("/drops/legal/buy", {"quantity": "1", "idempotency_key": "k"})
    hold = Hold.objects.get()

    for path in ("/", "/drops/legal/", "/nowhere/", "/legal/privacy/"):
        page = Client().get(path).content.decode()
        for kind in ("terms", "privacy", "notice", "withdrawal"):
            assert f'href="/legal/{kind}/"' in page, (path, kind)
    english = client.get(f"/holds/{hold.pk}/").content.decode()
    german = client.get(f"/holds/{hold.pk}/", HTTP_ACCEPT_LANGUAGE="de").content.decode()

    for page, button in ((english, "Order with obligation to pay"), (german, "Zahlungspflichtig bestellen")):
        terms = page.index('id="order-terms"')
        assert page.index('href="/legal/terms/"', terms) < page.index('id="pay"')
        assert page.index('href="/legal/withdrawal/"', terms) < page.index('id="pay"')
        assert re.search(rf'<button type="submit" id="pay">{button} · ', page)


def test_legal_pages_speak_the_readers_language_and_fall_back_to_the_template() -> None:
    # Before any identity: the template, with its placeholders, in the reader's language.
    assert "(your contact e-mail)" in Client().get("/legal/privacy/").content.decode()
    set_identity()

    english = Client().get("/legal/withdrawal/").content.decode()
    german = Client().get("/legal/withdrawal/", HTTP_ACCEPT_LANGUAGE="de").content.decode()

    assert "<h1>Returns and withdrawal</h1>" in english and "fourteen days" in english
    assert "vierzehn Tagen" in german and "hello@harbour-lane.example" in german
    assert "Harbour Lane GmbH" in Client().get("/legal/notice/").content.decode()
    assert Client().get("/legal/nothing/").status_code == 404
    assert Client().get("/legal/%3Cscript%3E/").status_code == 404


def test_a_script_in_a_merchants_legal_text_renders_inert() -> None:
    set_identity()
    LegalText.objects.filter(kind="terms", language="en").update(
        body='## Our <b>terms</b>\nLine one <script>alert("x")</script>\n\n'
        "<img src=x onerror=alert(1)> & more"
    )

    page = Client().get("/legal/terms/").content.decode()

    assert "<script>alert" not in page and "<img src=x" not in page and "<b>terms" not in page
    assert "<h2>Our &lt;b&gt;terms&lt;/b&gt;</h2>" in page
    assert "Line one &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "<p>&lt;img src=x onerror=alert(1)&gt; &amp; more</p>" in page


def test_control_the_page_would_run_the_script_if_the_text_were_marked_safe() -> None:
    from django.template.loader import render_to_string
    from django.utils.safestring import mark_safe

    from shop import legal

    body = 'Line one <script>alert("x")</script>'
    shown = render_to_string("shop/legal.html", {"kind": "terms", "title": "T", "body": mark_safe(body)})
    assert "<script>alert" in shown  # the template adds no escaping of its own: legal.html does it
    assert "<script>alert" not in legal.html(body)


def test_the_payment_provider_is_sent_the_shops_name_for_the_card_statement(
    payment_provider: str, settings
) -> None:
    settings.PAYMENT_PROVIDER_URL = payment_provider
    set_identity()
    make_drop(slug="statement", quantity=2)
    buyer = make_buyer("stan")
    client = Client()
    client.force_login(buyer)
    client.post("/drops/statement/buy", {"quantity": "1", "idempotency_key": "k"})

    started = services.start_payment(hold_id=Hold.objects.get().pk, buyer_id=buyer.pk)

    page = httpx.get(str(started.payment.redirect_url), timeout=10).text
    assert '<dd id="statement">HARBOUR LA</dd>' in page
