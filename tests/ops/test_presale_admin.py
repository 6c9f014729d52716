"""The drop's presale page in the admin: codes generated and exported as CSV, the list uploaded,
the presale's start set on the drop; bad input is a form error that changes nothing."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from holds.models import PresaleCode, PresaleListEntry
from holds.presale import ALPHABET
from shop.models import Drop
from tests.factories import inline_rows, make_buyer, make_drop, staff

pytestmark = pytest.mark.django_db


def merchant() -> Client:
    client = Client()
    client.force_login(staff("mona", "Merchants"))
    return client


def test_a_merchant_generates_codes_and_exports_them_as_csv(roles: None) -> None:
    drop = make_drop(starts_at=timezone.now() + timedelta(hours=1))
    client = merchant()
    url = f"/admin/shop/drop/{drop.pk}/presale/"

    made = client.post(url, {"codes-count": "25", "codes-max_uses": "3", "generate": "Generate"}, follow=True)
    exported = client.get(f"{url}codes.csv")

    assert made.status_code == 200 and "25 presale codes made" in made.content.decode()
    assert exported["Content-Type"] == "text/csv"
    assert f"presale-codes-{drop.slug}.csv" in exported["Content-Disposition"]
    header, *rows = csv.reader(io.StringIO(exported.content.decode()))
    assert header == ["code", "max_uses", "uses"] and len(rows) == 25
    assert {(m, u) for _, m, u in rows} == {("3", "0")}
    assert all(set(code) <= set(ALPHABET) for code, _, _ in rows)
    assert sorted(code for code, _, _ in rows) == sorted(PresaleCode.objects.values_list("code", flat=True))
    page = client.get(url).content.decode()
    assert "25</strong> codes" in page and "Export the codes (CSV)" in page


@pytest.mark.parametrize(
    "fields",
    [
        {"codes-count": "0", "codes-max_uses": "1"},
        {"codes-count": "10001", "codes-max_uses": "1"},
        {"codes-count": "ten", "codes-max_uses": "1"},
        {"codes-count": "5", "codes-max_uses": "0"},
        {"codes-count": "5"},
    ],
    ids=["none", "too many", "not a number", "no uses", "uses missing"],
)
def test_a_silly_number_of_codes_is_a_form_error_and_makes_none(roles: None, fields: dict[str, str]) -> None:
    drop = make_drop()

    answer = merchant().post(f"/admin/shop/drop/{drop.pk}/presale/", {**fields, "generate": "Generate"})

    assert answer.status_code == 200 and "errorlist" in answer.content.decode()
    assert not PresaleCode.objects.exists()


def test_a_merchant_uploads_the_list_pasted_or_as_a_file_and_a_bad_address_adds_nothing(roles: None) -> None:
    drop = make_drop()
    client = merchant()
    url = f"/admin/shop/drop/{drop.pk}/presale/"
    upload = SimpleUploadedFile("list.csv", b"email\nC@x.org\nd@x.org\n", content_type="text/csv")

    pasted = client.post(url, {"list-emails": "a@x.org, B@x.org", "upload": "Add"}, follow=True)
    filed = client.post(
        url, {"list-emails": "a@x.org", "list-emails_file": upload, "upload": "Add"}, follow=True
    )
    bad = client.post(url, {"list-emails": "e@x.org\nnot an address", "upload": "Add"})
    empty = client.post(url, {"list-emails": "  ", "upload": "Add"})

    assert "2 addresses added" in pasted.content.decode()
    assert "2 addresses added to the list (1 were on it)" in filed.content.decode()
    assert "is not an e-mail address" in bad.content.decode()
    assert "at least one e-mail address" in empty.content.decode()
    emails = sorted(PresaleListEntry.objects.filter(drop=drop).values_list("email", flat=True))
    assert emails == ["a@x.org", "b@x.org", "c@x.org", "d@x.org"]


def test_only_staff_who_may_change_the_drop_change_its_presale(roles: None) -> None:
    drop = make_drop()
    buyer = Client()
    buyer.force_login(make_buyer())
    on_call = Client()
    on_call.force_login(staff("otto", "On-call"))

    assert buyer.get(f"/admin/shop/drop/{drop.pk}/presale/codes.csv").status_code == 302  # to the login
    answer = on_call.post(
        f"/admin/shop/drop/{drop.pk}/presale/", {"codes-count": "5", "codes-max_uses": "1", "generate": "1"}
    )
    assert answer.status_code == 403 and not PresaleCode.objects.exists()


def change_form(client: Client, drop: Drop, presale: datetime) -> dict[str, object]:
    """The drop's change form as shown, posted back with the presale's start set."""
    page = client.get(f"/admin/shop/drop/{drop.pk}/change/")
    assert "Presale codes and list" in page.content.decode()
    form = page.context["adminform"].form
    data = {name: field.widget.format_value(form.initial.get(name)) for name, field in form.fields.items()}
    data |= inline_rows(page) | {"product": drop.product_id}
    for name, at in [
        ("starts_at", drop.starts_at),
        ("ends_at", drop.ends_at),
        ("presale_starts_at", presale),
    ]:
        data |= {f"{name}_0": f"{at:%Y-%m-%d}", f"{name}_1": f"{at:%H:%M:%S}"}
    return {k: v for k, v in data.items() if v is not None and v is not False}


def test_the_presale_start_is_set_on_the_drop_and_a_bad_one_is_shown_beside_it(roles: None) -> None:
    drop = make_drop(starts_at=timezone.now().replace(microsecond=0) + timedelta(hours=1))
    client = merchant()
    url = f"/admin/shop/drop/{drop.pk}/change/"

    late = client.post(url, change_form(client, drop, drop.starts_at + timedelta(minutes=5)))
    good = client.post(url, change_form(client, drop, drop.starts_at - timedelta(minutes=30)))

    assert late.status_code == 200
    errors = late.context["adminform"].form.errors
    assert errors["presale_starts_at"] == ["The presale must start before the drop's public start."]
    assert good.status_code == 302, good.context["adminform"].form.errors if good.context else good
    assert Drop.objects.get(pk=drop.pk).presale_starts_at == drop.starts_at - timedelta(minutes=30)
