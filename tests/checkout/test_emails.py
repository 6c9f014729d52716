"""E-mail a buyer trusts: HTML beside the text, a Message-ID on the shop's domain, and one click
to stop the optional ones (RFC 8058)."""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core import mail, signing
from django.core.mail import EmailMultiAlternatives
from django.db.models.functions import Now
from django.test import Client, override_settings
from django.utils import timezone

from checkout import emails, outbox, reminders
from checkout.models import Reminder
from shop import languages
from shop.models import Drop
from tests.factories import confirmed_order, make_buyer, make_drop

pytestmark = pytest.mark.django_db


def reminded(buyer: User, title: str = "Harbour Runner") -> EmailMultiAlternatives:
    """The reminder e-mail of a drop that just opened, as the relay sends it."""
    drop = make_drop(quantity=10, starts_at=timezone.now() + timedelta(hours=1), title=title)
    reminders.ask_reminder(drop=drop, buyer_id=buyer.pk)
    later = make_drop(quantity=10, starts_at=timezone.now() + timedelta(days=3))
    reminders.ask_reminder(drop=later, buyer_id=buyer.pk)  # not due: still waiting
    Drop.objects.filter(pk=drop.pk).update(starts_at=Now() - timedelta(seconds=1))
    assert reminders.send_due_reminders() == 1
    outbox.relay_outbox()
    (sent,) = [m for m in mail.outbox if "is on sale now" in m.subject and m.to == [buyer.email]]
    assert isinstance(sent, EmailMultiAlternatives)  # a text and an HTML part
    return sent


def paragraphs_of(text: str) -> list[str]:
    return [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]


def text_of(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


@override_settings(PUBLIC_BASE_URL="https://shop.example")
def test_every_message_has_an_html_part_saying_what_its_text_says_from_the_shops_own_domain() -> None:
    buyer = make_buyer("hana")
    drop = make_drop(slug="html-mail", quantity=3, title='Runner <script>alert("x")</script>')
    confirmed_order(drop, buyer, key="k", amount_minor=12900)
    outbox.relay_outbox()
    (confirmation,) = mail.outbox

    assert re.fullmatch(r"<order-\d+-confirmed@shop\.example>", confirmation.extra_headers["Message-ID"])
    assert isinstance(confirmation, EmailMultiAlternatives)
    ((page, kind),) = confirmation.alternatives
    assert kind == "text/html" and isinstance(page, str)
    assert "<script>" not in page and "&lt;script&gt;" in page  # the merchant's title, escaped
    words = text_of(page)
    for paragraph in paragraphs_of(str(confirmation.body)):
        assert " ".join(paragraph.split()) in words
    assert 'href="https://shop.example/orders/' in page  # its links, clickable
    assert "List-Unsubscribe" not in confirmation.extra_headers  # not optional mail


@override_settings(PUBLIC_BASE_URL="https://shop.example")
def test_a_reminder_carries_a_one_click_unsubscribe_that_stops_the_buyers_other_reminders() -> None:
    buyer, other = make_buyer("rosa"), make_buyer("otto")
    sent = reminded(buyer)
    reminded(other, title="Other drop")
    waiting = Reminder.objects.filter(buyer__in=[buyer, other], sent_at__isnull=True)
    assert waiting.count() == 2

    link = re.fullmatch(
        r"<(https://shop\.example/reminders/unsubscribe/\S+)>", sent.extra_headers["List-Unsubscribe"]
    )
    assert link and sent.extra_headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    ((page, _kind),) = sent.alternatives
    assert isinstance(page, str) and link[1] in page  # the HTML part links it too
    path = link[1].removeprefix("https://shop.example")

    provider = Client(enforce_csrf_checks=True)  # the mail provider: no session, no CSRF token
    asked = provider.get(path)
    assert asked.status_code == 200 and 'id="stop-reminders"' in asked.content.decode()
    assert waiting.count() == 2  # a link scanner's GET changes nothing

    done = provider.post(path, {"List-Unsubscribe": "One-Click"})
    assert done.status_code == 200 and 'data-state="done"' in done.content.decode()
    assert list(waiting.values_list("buyer", flat=True)) == [other.pk]  # only theirs
    assert provider.post(path).status_code == 200  # again: nothing left, still fine


def test_an_unsubscribe_link_the_shop_did_not_make_changes_nothing() -> None:
    buyer = make_buyer("ivo")
    reminders.ask_reminder(
        drop=make_drop(quantity=1, starts_at=timezone.now() + timedelta(days=1)), buyer_id=buyer.pk
    )
    good = emails.unsubscribe_url(buyer.pk).rsplit("/", 1)[1]
    value, stamp, signature = good.split(":")
    for token in (
        f"{buyer.pk + 1}:{stamp}:{signature}",  # another buyer's id under this signature
        f"{value}:{stamp}:{signature[:-2]}xx",
        "garbage",
        "%00",
        "x" * 3000,
    ):
        answer = Client().post(f"/reminders/unsubscribe/{token}")
        assert answer.status_code in {400, 404}, token
    assert Reminder.objects.filter(buyer=buyer).count() == 1
    with pytest.raises(signing.BadSignature):
        emails.unsubscribing_buyer(good + "0")


def test_a_german_buyers_reminder_and_its_calendar_event_are_in_german() -> None:
    buyer = make_buyer("greta")
    languages.remember(buyer.pk, "de")
    drop = make_drop(quantity=10, starts_at=timezone.now() + timedelta(hours=1), title="Hafenläufer")
    reminders.ask_reminder(drop=drop, buyer_id=buyer.pk)
    Drop.objects.filter(pk=drop.pk).update(starts_at=Now() - timedelta(seconds=1))
    reminders.send_due_reminders()
    outbox.relay_outbox()

    (sent,) = [m for m in mail.outbox if m.to == [buyer.email]]
    ((name, ics, kind),) = sent.attachments
    unfolded = ics.replace("\r\n ", "")
    assert "SUMMARY:Hafenläufer geht in den Verkauf" in unfolded
    assert "DESCRIPTION:Der Verkauf von Hafenläufer bei" in unfolded and "goes on sale" not in unfolded
    assert kind.startswith("text/calendar") and name.endswith(".ics")
