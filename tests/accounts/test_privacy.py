"""A buyer's data: downloaded whole, and the person erased with the sale kept."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django_redis import get_redis_connection
from pytest_django import Settings

from accounts import privacy
from admission import state
from admission.models import Ticket
from checkout.models import Order, PushSubscription
from holds.counts import invariant
from holds.models import PresaleListEntry
from shop import languages
from shop.models import Address, ApiToken
from tests.factories import confirmed_order, make_buyer, make_drop, staff
from tests.harness import BODY, call, reserve_headers, run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_edge")]

PERSON = {"email": "ada.lovelace@example.com", "name": "Ada Lovelace", "phone": "+49 40 1234567"}


def a_buyer_with_a_history() -> tuple[User, Order]:
    drop = make_drop(slug="kept", quantity=5)
    buyer = make_buyer("adalove", email=PERSON["email"])
    get_user_model().objects.filter(pk=buyer.pk).update(first_name="Ada", last_name="Lovelace")
    order = confirmed_order(drop, buyer, key="k", amount_minor=12900)
    shipped_to = Address.objects.create(
        user=buyer, name=PERSON["name"], line1="Hafenstraße 1", postal_code="20457", city="Hamburg",
        country="DE", phone=PERSON["phone"],
    )  # fmt: skip
    Address.objects.create(
        user=buyer, name=PERSON["name"], line1="Alte Gasse 9", postal_code="20095", city="Hamburg",
        country="DE", phone=PERSON["phone"],
    )  # fmt: skip
    Order.objects.filter(pk=order.pk).update(shipping_address=shipped_to)
    order.refresh_from_db()
    Ticket.objects.create(drop=drop, buyer=buyer, number=3)
    PresaleListEntry.objects.create(drop=drop, email=PERSON["email"])
    languages.remember(buyer.pk, "de")
    # a phone opted into pushes (its endpoint names her, as a push service's may not: the scan sees it)
    PushSubscription.objects.create(
        buyer=buyer,
        endpoint="https://fcm.googleapis.com/fcm/send/lovelace-phone",
        p256dh="B" * 87,
        auth="A" * 22,
    )
    return buyer, order


def test_a_buyer_downloads_everything_the_shop_keeps_about_them() -> None:
    buyer, order = a_buyer_with_a_history()
    confirmed_order(order.drop, make_buyer("other"), key="k", amount_minor=12900)  # not theirs: not in it
    client = Client()
    client.force_login(buyer)
    german: dict[str, Any] = {"HTTP_ACCEPT_LANGUAGE": "de"}  # each visit records the buyer's language
    assert 'id="download-data"' in client.get("/accounts/data/", **german).content.decode()

    answer = client.get("/accounts/data/download", **german)
    data = json.loads(answer.content)

    assert answer["Content-Disposition"] == 'attachment; filename="my-data.json"'
    assert data["account"]["email"] == PERSON["email"] and data["account"]["language"] == "de"
    assert {a["line1"] for a in data["addresses"]} == {"Hafenstraße 1", "Alte Gasse 9"}
    assert [o["id"] for o in data["orders"]] == [order.pk] and "Hafenstraße 1" in data["orders"][0][
        "shipping_address"
    ]
    assert data["queue_tickets"] == [
        {"drop": "kept", "number": 3, "joined": data["queue_tickets"][0]["joined"]}
    ]
    assert [m["kind"] for m in data["emails"]] == ["order_confirmed.email"]
    assert [p["service"] for p in data["push_subscriptions"]] == ["fcm.googleapis.com"]
    assert Client().get("/accounts/data/download").status_code == 302  # a login first


def person_left_anywhere() -> list[str]:
    """Every text column of every table that still holds the person's e-mail, name or phone."""
    found = []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND data_type IN ('text', 'character varying', 'jsonb')"
        )
        for table, column in cursor.fetchall():
            for value in (PERSON["email"], PERSON["name"], PERSON["phone"], "Lovelace"):
                cursor.execute(
                    # the names come from PostgreSQL's own catalogue, not from input
                    f'SELECT count(*) FROM "{table}" WHERE "{column}"::text ILIKE %s',
                    [f"%{value}%"],
                )
                if cursor.fetchone()[0]:
                    found.append(f"{table}.{column}: {value}")
    return found


def test_erasure_leaves_the_person_only_in_the_kept_order_address_and_every_count_as_it_was() -> None:
    buyer, order = a_buyer_with_a_history()
    before = invariant(drop_id=order.drop_id)
    assert "auth_user.email: " + PERSON["email"] in person_left_anywhere()  # the scan sees them

    privacy.erase(user_id=buyer.pk)

    # the address the order shipped to is kept for the retention; nothing else names the person
    assert sorted(person_left_anywhere()) == [
        "shop_address.name: Ada Lovelace",
        "shop_address.name: Lovelace",
    ]
    kept = Address.objects.get(user=buyer)
    assert (kept.pk, kept.line1, kept.phone) == (order.shipping_address_id, "Hafenstraße 1", "")
    assert invariant(drop_id=order.drop_id) == before
    assert (
        Order.objects.get(pk=order.pk).state == "confirmed"
        and Ticket.objects.filter(buyer=buyer).count() == 1
    )
    privacy.erase(user_id=buyer.pk)  # again: nothing more to do, no error
    assert Order.objects.get(pk=order.pk).state == "confirmed"


def test_after_the_retention_the_kept_address_is_blanked_too(settings: Settings) -> None:
    buyer, order = a_buyer_with_a_history()
    privacy.erase(user_id=buyer.pk)
    assert privacy.forget_expired_records() == 0  # the order is recent
    Order.objects.filter(pk=order.pk).update(created_at="2010-01-01T00:00:00Z")

    assert privacy.forget_expired_records() == 1
    assert person_left_anywhere() == []
    assert Address.objects.get(user=buyer).country == "DE"


@pytest.mark.django_db(transaction=True)  # the lane's thread reads what this test committed
def test_an_erased_buyer_cannot_log_in_and_their_token_and_session_are_refused_at_every_door() -> None:
    make_drop(slug="doors", quantity=5)
    buyer = make_buyer("eve")
    session = Client()
    session.force_login(buyer)
    token = "tok-" + "x" * 40
    ApiToken.objects.create(user=buyer, digest=ApiToken.digest_of(token))
    auth = {"authorization": f"Bearer {token}"}
    first = run(
        lambda: call("POST", "/api/drops/doors/holds", headers=reserve_headers(auth, key="k1"), body=BODY)
    )
    assert first.status == 201  # the lane knows the token now

    answer = session.post("/accounts/data/", {"confirm": "ERASE"})
    assert 'id="erased"' in answer.content.decode()

    assert Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 401
    after = run(
        lambda: call("POST", "/api/drops/doors/holds", headers=reserve_headers(auth, key="k2"), body=BODY)
    )
    assert after.status == 401
    assert session.get("/orders/").status_code == 302  # signed out
    assert not Client().login(username="eve", password="correct horse battery")
    revoked = get_redis_connection("default").zscore(state.REVOKED, str(buyer.pk))
    assert revoked is not None  # what every edge hears


def test_erasure_needs_the_typed_word_and_is_not_for_staff(roles: None) -> None:
    buyer = make_buyer("ben")
    client = Client()
    client.force_login(buyer)
    for garbage in ("", "erase", "ERASE NOW", "\x00", "x" * 10_000):
        page = client.post("/accounts/data/", {"confirm": garbage}, follow=True).content.decode()
        assert "Type ERASE to confirm" in page
    assert get_user_model().objects.get(pk=buyer.pk).is_active

    clerk = staff("clerk", "Merchants")
    desk = Client()
    desk.force_login(clerk)
    desk.post("/accounts/data/", {"confirm": "ERASE"})
    assert get_user_model().objects.get(pk=clerk.pk).is_active
    with pytest.raises(ValueError, match="staff"):
        privacy.erase(user_id=clerk.pk)


def test_the_merchant_erases_a_buyer_on_request_in_the_admin(roles: None) -> None:
    buyer, _order = a_buyer_with_a_history()
    owner = Client()
    owner.force_login(get_user_model().objects.create_superuser("owner", "o@shop.example", "pw-pw-pw-pw"))

    owner.post("/admin/auth/user/", {"action": "erase_personal_data", "_selected_action": [buyer.pk]})

    erased = get_user_model().objects.get(pk=buyer.pk)
    assert re.fullmatch(r"erased-\d+-[0-9a-f]{8}", erased.username) and not erased.is_active
    merchant = Client()
    merchant.force_login(staff("mira", "Merchants"))
    other = make_buyer("kim")
    merchant.post("/admin/auth/user/", {"action": "erase_personal_data", "_selected_action": [other.pk]})
    assert get_user_model().objects.get(pk=other.pk).is_active  # without delete_user: not theirs to do
