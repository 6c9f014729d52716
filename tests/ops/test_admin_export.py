from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client

from checkout.models import Order
from holds import services as holds
from shop.models import Drop
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db

HEADER = ["drop", "order", "buyer", "email", "quantity", "units", "amount", "currency", "state", "refunded"]


def export(drop_id: int) -> dict[str, dict[str, str]]:
    """The admin's CSV export of one drop, as rows keyed by buyer (as written, guard included)."""
    merchant = get_user_model().objects.create_user("exporter", password="pw-pw-pw-pw", is_staff=True)
    merchant.groups.add(Group.objects.get(name="Merchants"))
    client = Client()
    client.force_login(merchant)
    answer = client.post("/admin/shop/drop/", {"action": "export_orders_csv", "_selected_action": [drop_id]})
    assert answer["Content-Type"] == "text/csv"
    header, *rows = csv.reader(io.StringIO(answer.content.decode()))
    assert header[: len(HEADER)] == HEADER
    return {row[2]: dict(zip(header, row, strict=True)) for row in rows}


def order(drop: Drop, username: str, **fields: object) -> None:
    buyer = make_buyer(username, email="")
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key=f"k-{buyer.pk}").hold
    Order.objects.create(
        hold=hold, buyer=buyer, drop=drop, quantity=1, amount_minor=1000, currency="EUR", **fields
    )


def test_empty_cells_stay_empty(roles: None) -> None:
    # given an order of a buckets drop: no units, no e-mail address, no failure
    drop = make_drop(slug="plain-export", quantity=3)
    order(drop, "ann")

    row = export(drop.pk)["ann"]

    # then those cells are empty, not a lone quote
    assert (row["email"], row["units"], row["failure_reason"]) == ("", "", "")
    assert row["drop"] == "plain-export" and row["amount"] == "10.00"


def test_cells_a_spreadsheet_would_run_as_formulas_are_guarded(roles: None) -> None:
    # given buyer-influenced text that a spreadsheet reads as a formula (OWASP CSV injection)
    drop = make_drop(slug="formula-export", quantity=5)
    order(drop, "eve", failure_reason='=HYPERLINK("http://evil")')
    order(drop, "@mallory", failure_reason="\t=1+1")
    order(drop, "bob", failure_reason="card declined - try again")

    rows = export(drop.pk)

    # then they start with a quote; text with a dash inside, and the empty e-mail, are left alone
    assert rows["eve"]["failure_reason"] == '\'=HYPERLINK("http://evil")'
    assert rows["'@mallory"]["failure_reason"] == "'\t=1+1"
    assert rows["bob"]["failure_reason"] == "card declined - try again"
    assert rows["bob"]["email"] == ""
