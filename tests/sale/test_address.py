"""A product that ships asks for a shipping address while the hold lasts; a digital one asks none."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from holds import services as holds
from holds.models import Hold
from shop.models import Address, Drop
from tests.factories import expire_in, make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)

GOOD = {
    "name": "Ada Lovelace",
    "line1": "Hauptstraße 5",
    "line2": "",
    "postal_code": "10115",
    "city": "Berlin",
    "region": "",
    "country": "DE",
    "phone": "+49 30 1234567",
}


def shipped(slug: str, ships: bool = True) -> Drop:
    return make_drop(slug=slug, quantity=5, ships=ships)


def held(drop: Drop, buyer: User | None = None) -> tuple[User, Hold, Client]:
    buyer = buyer or make_buyer()
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    client = Client()
    client.force_login(buyer)
    return buyer, hold, client


def put(client: Client, hold_id: int, body: object) -> tuple[int, dict]:
    answer = client.put(f"/api/holds/{hold_id}/address", json.dumps(body), content_type="application/json")
    return answer.status_code, answer.json()


def test_a_shipped_product_asks_for_an_address_and_the_next_drop_remembers_it() -> None:
    buyer, hold, client = held(shipped("parcel"))

    page = client.get(f"/holds/{hold.pk}/").content.decode()
    assert 'id="address-form"' in page and 'id="address-needed"' in page

    saved = client.post(f"/holds/{hold.pk}/address", GOOD)
    assert saved.status_code == 302
    hold.refresh_from_db()
    assert hold.shipping_address is not None
    assert (hold.shipping_address.city, hold.shipping_address.country) == ("Berlin", "DE")
    shown = client.get(f"/holds/{hold.pk}/").content.decode()
    assert 'id="address-given"' in shown and "Hauptstraße 5, 10115 Berlin, Germany" in shown

    _, next_hold, _ = held(shipped("next-parcel"), buyer)
    suggested = client.get(f"/holds/{next_hold.pk}/").content.decode()
    assert 'value="Hauptstraße 5"' in suggested and 'value="10115"' in suggested
    assert '<option value="DE" selected>' in suggested
    assert 'id="address-needed"' in suggested  # suggested, not given: this hold has none yet


def test_the_form_tells_autofill_what_each_field_is_and_names_countries_in_the_buyers_language() -> None:
    _, hold, client = held(shipped("autofill-parcel"))

    page = client.get(f"/holds/{hold.pk}/", HTTP_ACCEPT_LANGUAGE="de-DE,de").content.decode()

    for field, token in [
        ("name", "shipping name"),
        ("line1", "shipping address-line1"),
        ("postal_code", "shipping postal-code"),
        ("city", "shipping address-level2"),
        ("country", "shipping country"),
        ("phone", "shipping tel"),
    ]:
        tag = re.search(rf'<(?:input|select)[^>]*name="{field}"[^>]*>', page)
        assert tag and f'autocomplete="{token}"' in tag.group(0), field
    assert '<option value="DE">Deutschland</option>' in page
    assert '<option value="AT">Österreich</option>' in page
    # sorted as a reader looks: Österreich among the O's, before Polen, not after Zypern
    assert page.index(">Österreich<") < page.index(">Polen<") < page.index(">Zypern<")

    client.post(f"/holds/{hold.pk}/address", GOOD, HTTP_ACCEPT_LANGUAGE="de-DE,de")
    shown = client.get(f"/holds/{hold.pk}/", HTTP_ACCEPT_LANGUAGE="de-DE,de").content.decode()
    assert "Hauptstraße 5, 10115 Berlin, Deutschland" in shown


def test_the_api_keeps_an_address_and_answers_it() -> None:
    _, hold, client = held(shipped("api-parcel"))

    status, body = put(client, hold.pk, GOOD)

    assert status == 200
    assert {key: body[key] for key in GOOD} == GOOD
    hold.refresh_from_db()
    assert hold.shipping_address_id == body["id"]


def test_a_digital_product_asks_for_none() -> None:
    _, hold, client = held(shipped("ticket", ships=False))

    page = client.get(f"/holds/{hold.pk}/").content.decode()
    status, body = put(client, hold.pk, GOOD)

    assert 'id="address-form"' not in page and "Shipping address" not in page
    assert (status, body["error"]) == (409, "no_shipping")
    assert not Address.objects.exists()


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"name": "Ada\x00Lovelace"}, "name", "Null characters are not allowed."),
        ({"city": "Berlin\x1b[31m"}, "city", "no control characters"),
        ({"line1": "Main St\n5"}, "line1", "no control characters"),
        ({"city": ""}, "city", "This field is required."),
        ({"country": "XX"}, "country", "Select a valid choice."),
        ({"country": "EU"}, "country", "Select a valid choice."),
        ({"postal_code": "1" * 21}, "postal_code", "at most 20 characters"),
        ({"name": "A" * 101}, "name", "at most 100 characters"),
        ({"phone": "call me"}, "phone", "A phone number has digits"),
        ({"postal_code": 10115}, "postal_code", "Give this as text."),
    ],
)
def test_bad_input_is_refused_field_by_field_and_nothing_changes(
    change: dict[str, object], field: str, message: str
) -> None:
    _, hold, client = held(shipped("bad-parcel"))

    status, body = put(client, hold.pk, {**GOOD, **change})

    assert (status, body["error"]) == (400, "invalid_address")
    assert message in body["fields"][field]
    if isinstance(change[field], str):  # a form posts text only
        page = client.post(f"/holds/{hold.pk}/address", {**GOOD, **change})
        assert page.status_code == 400 and message in page.content.decode().replace("&#x27;", "'")
    hold.refresh_from_db()
    assert hold.shipping_address_id is None and not Address.objects.exists()


def test_a_missing_field_and_a_body_that_is_no_object_are_refused() -> None:
    _, hold, client = held(shipped("half-parcel"))

    status, body = put(client, hold.pk, {"name": "Ada"})
    listed, as_list = put(client, hold.pk, ["Ada"])

    assert status == 400 and set(body["fields"]) == {"line1", "postal_code", "city", "country"}
    assert listed == 422 and as_list["error"] == "invalid"
    assert not Address.objects.exists()


def test_someone_elses_hold_is_not_found_and_an_ended_one_is_closed() -> None:
    _, hold, _ = held(shipped("theirs"))
    _, _, stranger = held(shipped("mine"))

    status, body = put(stranger, hold.pk, GOOD)
    page = stranger.post(f"/holds/{hold.pk}/address", GOOD)
    assert (status, body["error"]) == (404, "not_found") and page.status_code == 404

    _, ended, client = held(shipped("ended-parcel"))
    expire_in([ended.pk], -1)
    status, body = put(client, ended.pk, GOOD)
    assert (status, body["error"]) == (409, "hold_not_active")
    assert not Address.objects.exists()


def test_create_drop_makes_a_product_that_ships() -> None:
    call_command("create_drop", "--slug", "boxed", "--quantity", "2", "--ships", stdout=io.StringIO())
    call_command("create_drop", "--slug", "e-ticket", "--quantity", "2", stdout=io.StringIO())

    assert Drop.objects.get(slug="boxed").product.ships is True
    assert Drop.objects.get(slug="e-ticket").product.ships is False
