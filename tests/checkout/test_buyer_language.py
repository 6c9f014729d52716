"""Each buyer's e-mails in their own language (issue 25): the language they use the shop in is
recorded from their requests, only when it changes, and the relay writes each message in it, also
those a task enqueues with no request around (reminders, raffle results)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core import mail
from django.db import connection
from django.db.models.functions import Now
from django.test import Client, TestCase
from django.test.utils import CaptureQueriesContext
from django.utils import timezone, translation

from admission import services as admission
from checkout import outbox, raffles, reminders
from sale import offers
from shop import languages
from shop.models import Address, BuyerLanguage, Drop
from tests.factories import confirmed_order, make_buyer, make_drop, start_now

pytestmark = pytest.mark.django_db

GERMAN = "de-DE,de;q=0.9,en;q=0.5"


def visit(buyer: User, accept: str) -> Client:
    """The buyer signed in, looking at the drop list in a browser that asks for `accept`."""
    client = Client()
    client.force_login(buyer)
    assert client.get("/", HTTP_ACCEPT_LANGUAGE=accept).status_code == 200
    return client


def recorded(buyer: User) -> str | None:
    return BuyerLanguage.objects.filter(user=buyer).values_list("language", flat=True).first()


def language_writes(client: Client, url: str, **headers: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        client.get(url, **headers)  # type: ignore[arg-type]
    return sum("shop_buyerlanguage" in q["sql"] for q in queries.captured_queries)


def relay_as_english_worker() -> None:
    """The relay in a worker whose own language is English (a test's requests leave theirs active)."""
    with translation.override("en"):
        outbox.relay_outbox()


def test_the_language_is_recorded_once_per_change_and_at_the_switch() -> None:
    buyer = make_buyer("lena")
    client = visit(buyer, GERMAN)
    assert recorded(buyer) == "de"
    # the same language again: the session remembers it was recorded, no statement at all
    assert language_writes(client, "/", HTTP_ACCEPT_LANGUAGE=GERMAN) == 0
    # the switcher: recorded in the answer that sets the cookie, before any next page
    answer = client.post("/i18n/setlang/", {"language": "en", "next": "/"}, HTTP_ACCEPT_LANGUAGE=GERMAN)
    assert answer.status_code == 302 and recorded(buyer) == "en"
    assert language_writes(client, "/") == 0  # the cookie's English, as recorded
    client.post("/i18n/setlang/", {"language": "de", "next": "/"})
    assert recorded(buyer) == "de"
    # a language the shop does not speak changes nothing
    client.post("/i18n/setlang/", {"language": "xx", "next": "/"})
    assert recorded(buyer) == "de"
    with pytest.raises(LookupError):
        languages.remember(buyer.pk, "xx")
    # a visitor who is not signed in is nobody to record
    assert language_writes(Client(), "/", HTTP_ACCEPT_LANGUAGE=GERMAN) == 0
    assert BuyerLanguage.objects.count() == 1


def test_a_new_session_in_another_language_records_it() -> None:
    buyer = make_buyer("mika")
    visit(buyer, GERMAN)
    visit(buyer, "en-GB,en")  # another browser of the same buyer
    assert recorded(buyer) == "en"


def test_a_german_and_an_english_buyer_each_get_their_order_email_in_their_language() -> None:
    drop = make_drop(slug="two-tongues", quantity=5, price_minor=4900)
    dora, eric = make_buyer("dora"), make_buyer("eric")
    # greeted by the name they gave: dora's on an address, eric's on the account; a username is none
    Address.objects.create(
        user=dora, name="Dora Maar", line1="Rue 1", postal_code="75001", city="Paris", country="FR"
    )
    eric.first_name, eric.last_name = "Eric", "Satie"
    eric.save()
    visit(dora, GERMAN)
    visit(eric, "en-US,en")
    orders = {
        name: confirmed_order(drop, buyer, key=name, amount_minor=4900)
        for name, buyer in (("dora", dora), ("eric", eric))
    }
    mail.outbox.clear()
    relay_as_english_worker()
    by_buyer = {m.to[0]: m for m in mail.outbox}
    german, english = by_buyer["dora@example.com"], by_buyer["eric@example.com"]
    title = drop.display_title
    assert german.subject == f"[Floodgate] Ihre Bestellung {orders['dora'].pk} ist bestätigt: {title}"
    assert german.body.startswith("Guten Tag Dora Maar,\n") and "49,00\xa0€" in german.body
    assert english.subject == f"[Floodgate] Your order {orders['eric'].pk} is confirmed: {drop.display_title}"
    assert english.body.startswith("Hello Eric Satie,\n") and "Total paid" in english.body


def test_control_without_the_buyers_language_the_german_buyer_reads_the_workers(monkeypatch) -> None:
    drop = make_drop(slug="no-tongue", quantity=5, price_minor=4900)
    dora = make_buyer("dora")
    visit(dora, GERMAN)
    order = confirmed_order(drop, dora, key="control", amount_minor=4900)
    monkeypatch.setattr(languages, "of", lambda buyer, default: default)  # the override removed
    mail.outbox.clear()
    relay_as_english_worker()
    (sent,) = mail.outbox
    # not German
    assert sent.subject == f"[Floodgate] Your order {order.pk} is confirmed: {drop.display_title}"


def test_a_buyer_with_no_language_recorded_gets_the_workers() -> None:
    drop = make_drop(slug="unknown-tongue", quantity=5, price_minor=4900)
    buyer = make_buyer("nobody")
    order = confirmed_order(drop, buyer, key="none", amount_minor=4900)
    mail.outbox.clear()
    relay_as_english_worker()
    assert mail.outbox[0].subject == f"[Floodgate] Your order {order.pk} is confirmed: {drop.display_title}"


def test_reminders_enqueued_by_the_duty_go_out_in_each_buyers_language() -> None:
    dora, eric = make_buyer("dora"), make_buyer("eric")
    # greeted by the name they gave: dora's on an address, eric's on the account; a username is none
    Address.objects.create(
        user=dora, name="Dora Maar", line1="Rue 1", postal_code="75001", city="Paris", country="FR"
    )
    eric.first_name, eric.last_name = "Eric", "Satie"
    eric.save()
    visit(dora, GERMAN)
    visit(eric, "en")
    drop = make_drop(quantity=10, starts_at=timezone.now() + timedelta(hours=1), title="Nachtzug")
    for buyer in (dora, eric):
        assert reminders.ask_reminder(drop=drop, buyer_id=buyer.pk).new
    Drop.objects.filter(pk=drop.pk).update(starts_at=Now() - timedelta(seconds=1))
    assert reminders.send_due_reminders() == 2
    mail.outbox.clear()
    relay_as_english_worker()
    by_buyer = {m.to[0]: m for m in mail.outbox}
    assert by_buyer["dora@example.com"].subject == "[Floodgate] Nachtzug ist jetzt im Verkauf"
    assert "Guten Tag Dora Maar," in by_buyer["dora@example.com"].body
    assert by_buyer["eric@example.com"].subject == "[Floodgate] Nachtzug is on sale now"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_edge")
def test_raffle_results_go_out_in_each_buyers_language() -> None:
    dora, eric = make_buyer("dora"), make_buyer("eric")
    # greeted by the name they gave: dora's on an address, eric's on the account; a username is none
    Address.objects.create(
        user=dora, name="Dora Maar", line1="Rue 1", postal_code="75001", city="Paris", country="FR"
    )
    eric.first_name, eric.last_name = "Eric", "Satie"
    eric.save()
    visit(dora, GERMAN)
    visit(eric, "en")
    drop = make_drop(
        slug="los",
        title="Losbude",
        quantity=2,
        waiting_room=True,
        raffle=True,
        offer_seconds=600,
        starts_at=timezone.now() + timedelta(minutes=10),
    )
    for buyer in (dora, eric):
        admission.join(drop=drop, buyer_id=buyer.pk)
    # the entries' close and the draw (as test_raffle's close_and_draw): both win a unit
    start_now(drop.pk)
    drop = Drop.objects.select_related("product").get(pk=drop.pk)
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert admission.run_wave(drop) is None
    offers.offer_returns(drop, wait=True)
    mail.outbox.clear()
    assert raffles.announce_raffle_results() == 2
    relay_as_english_worker()
    by_buyer = {m.to[0]: m for m in mail.outbox}
    german, english = by_buyer["dora@example.com"], by_buyer["eric@example.com"]
    assert german.subject == "[Floodgate] Sie haben gewonnen: Bezahlen Sie Ihr Stück von Losbude"
    assert "Sie haben bei der Verlosung von Losbude ein Stück gewonnen." in german.body
    assert english.subject == "[Floodgate] You won: pay for your unit of Losbude"
    assert "you won a unit in the raffle of Losbude." in english.body
    assert settings.LANGUAGE_CODE == "en"


def test_a_session_whose_account_is_gone_records_nothing_and_still_gets_its_page() -> None:
    buyer = make_buyer("gone")
    client = Client()
    client.force_login(buyer)
    buyer.delete()
    assert client.get("/", HTTP_ACCEPT_LANGUAGE=GERMAN).status_code == 200
    assert not BuyerLanguage.objects.exists()
