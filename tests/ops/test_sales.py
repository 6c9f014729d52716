"""The merchant's sales page: units and revenue per slot since the start, drawn."""

from __future__ import annotations

import itertools
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from catalogue.services import NewVariant
from checkout import refunds, services
from checkout.models import Payment
from ops import sales
from shop.models import Variant
from tests.checkout.helpers import pending_sales
from tests.factories import make_buyer, make_drop, staff

pytestmark = pytest.mark.django_db(transaction=True)


def sold_at(drop, seconds: list[float], variant: Variant | None = None) -> list[int]:
    """One unit sold per entry, that many seconds after the drop's start; the orders' ids."""
    made = pending_sales(drop, [make_buyer().pk for _ in seconds], variant=variant)
    for sale, after in zip(made, seconds, strict=True):
        assert services.process_event(event_pk=sale.event) == "confirmed"
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE holds_hold SET ended_at = %s WHERE id = %s",
                [drop.starts_at + timedelta(seconds=after), sale.hold],
            )
    return [sale.order for sale in made]


def test_sales_are_counted_per_slot_and_drawn_up_to_the_totals() -> None:
    drop = make_drop(quantity=10, starts_at=timezone.now() - timedelta(minutes=5))
    orders = sold_at(drop, [0.2, 0.7, 1.5, 90.0])
    Payment.objects.filter(order_id=orders[0]).update(state="captured")
    refunds._record(refunds.request_refund(order_id=orders[0], by=None).refund, "succeeded", "re_1", "")

    found = sales.sales(drop)

    assert found.step_seconds == 2  # 90 s cut into at most 60 slots
    # from the first sale's whole second (0): 0.2, 0.7 and 1.5 s in the first slot
    assert [(s.starts, s.units, s.total_units) for s in found.slots] == [(0, 3, 3), (90, 1, 4)]
    assert found.units == 4 and found.revenue == "€196.00" and found.refunded == "€49.00"
    points = [tuple(map(float, p.split(","))) for p in found.units_path.split()]
    assert points[0] == (0.0, sales.HEIGHT) and points[-1] == (sales.WIDTH, 0.0)
    assert all(a[0] <= b[0] and a[1] >= b[1] for a, b in itertools.pairwise(points))  # rising


def test_the_sales_page_shows_the_chart_to_who_may_see_the_drop(roles: None) -> None:
    drop = make_drop(quantity=5)
    sold_at(drop, [3.0])
    merchant, buyer = Client(), Client()
    merchant.force_login(staff("mona", "Merchants"))
    buyer.force_login(make_buyer())

    page = merchant.get(f"/admin/shop/drop/{drop.pk}/sales/").content.decode()
    empty = merchant.get(f"/admin/shop/drop/{make_drop(quantity=1).pk}/sales/").content.decode()

    assert re.search(r'<polyline id="sales-units" points="[0-9., ]+"', page)
    assert "1</strong> unit sold for <strong>€49.00" in page
    assert "<small>(+3 seconds)</small>" in page and "the first at" not in page  # one sale: one moment
    assert 'id="sales-none"' in empty
    assert merchant.get("/admin/shop/drop/999999/sales/").status_code == 404
    assert buyer.get(f"/admin/shop/drop/{drop.pk}/sales/").status_code == 302  # to the admin's login
    assert (
        f"/admin/shop/drop/{drop.pk}/sales/"
        in merchant.get(f"/admin/shop/drop/{drop.pk}/change/").content.decode()
    )


def test_a_drop_of_sizes_draws_a_line_per_size_to_the_totals_scale(roles: None) -> None:
    sizes = [NewVariant("S", 3), NewVariant("M", 3)]
    drop = make_drop(quantity=6, variants=sizes, starts_at=timezone.now() - timedelta(minutes=5))
    sold_at(drop, [0.5, 30.0], drop.variants.get(name="S"))
    sold_at(drop, [4.0], drop.variants.get(name="M"))
    merchant = Client()
    merchant.force_login(staff("mae", "Merchants"))

    found = sales.sales(drop)
    page = merchant.get(f"/admin/shop/drop/{drop.pk}/sales/").content.decode()

    assert [(v.name, v.units, v.revenue) for v in found.variants] == [("S", 2, "€98.00"), ("M", 1, "€49.00")]
    s_points, m_points = ([p.split(",") for p in v.units_path.split()] for v in found.variants)
    assert float(s_points[-1][1]) == pytest.approx(sales.HEIGHT / 3, abs=0.1)  # S rises to 2 of the 3 sold
    assert float(m_points[-1][1]) == pytest.approx(sales.HEIGHT * 2 / 3, abs=0.1)  # M to 1 of 3
    assert page.count('class="sales-variant"') == 2
    assert "S: 2 units, €98.00" in page and "M: 1 unit, €49.00" in page  # the legend


def test_a_drop_of_one_stock_has_no_lines_per_variant() -> None:
    drop = make_drop(quantity=2, starts_at=timezone.now() - timedelta(minutes=5))
    sold_at(drop, [1.0])

    assert sales.sales(drop).variants == []
