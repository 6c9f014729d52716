"""A payment that arrived after its hold ended is voided, and the buyer is told so by e-mail once:
not charged, and (while units remain) where to reserve again."""

from __future__ import annotations

import pytest

from checkout import emails
from checkout import services as checkout
from checkout.models import OutboxMessage
from checkout.outbox import LATE_VOIDED_TOPIC, relay_outbox
from holds import services as holds
from tests.checkout.helpers import pending_sales
from tests.factories import expire_in, make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)


def late_sale(slug: str, quantity: int, name: str):
    drop = make_drop(slug=slug, quantity=quantity)
    (sale,) = pending_sales(drop, [make_buyer(name).pk])
    expire_in([sale.hold], -1)  # the hold ran out before the authorisation came
    return drop, sale


def test_a_voided_late_payment_is_told_once_with_a_link_to_reserve_again(settings, mailoutbox) -> None:
    settings.PUBLIC_BASE_URL = "https://shop.example"
    drop, sale = late_sale("late-left", 3, "latecomer")

    # when the authorisation is processed, twice (a redelivered task), and the outbox relayed twice
    assert checkout.process_event(event_pk=sale.event) == "too_late_voiding"
    assert checkout.process_event(event_pk=sale.event) == "already_processed"
    relay_outbox()
    relay_outbox()

    # then one message, one e-mail
    assert OutboxMessage.objects.filter(topic=LATE_VOIDED_TOPIC).count() == 1
    assert len(mailoutbox) == 1
    mail = mailoutbox[0]
    assert mail.to == ["latecomer@example.com"]
    assert "not charged" in mail.subject and "you were not charged" in mail.body
    assert "after your hold had ended" in mail.body
    assert "3 units still on sale" in mail.body
    assert f"https://shop.example/drops/{drop.slug}/" in mail.body
    assert mail.extra_headers["Message-ID"] == emails.message_id(f"order-{sale.order}-late-voided")


def test_with_nothing_left_the_email_offers_no_link(settings, mailoutbox) -> None:
    settings.PUBLIC_BASE_URL = "https://shop.example"
    drop, sale = late_sale("late-gone", 1, "toolate")
    # the unit that came back went to someone else meanwhile
    holds.reserve(drop=drop, buyer_id=make_buyer("quicker").pk, quantity=1, idempotency_key="q")

    assert checkout.process_event(event_pk=sale.event) == "too_late_voiding"
    relay_outbox()

    assert len(mailoutbox) == 1
    assert "you were not charged" in mailoutbox[0].body
    assert "no units left" in mailoutbox[0].body and "https://shop.example/drops/" not in mailoutbox[0].body


def test_a_paid_order_gets_no_late_payment_email(mailoutbox) -> None:
    drop = make_drop(slug="on-time", quantity=2)
    (sale,) = pending_sales(drop, [make_buyer("ontime").pk])
    assert checkout.process_event(event_pk=sale.event) == "confirmed"
    relay_outbox()
    assert not OutboxMessage.objects.filter(topic=LATE_VOIDED_TOPIC).exists()
    assert [m.subject for m in mailoutbox if "not charged" in m.subject] == []
