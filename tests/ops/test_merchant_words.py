"""The admin in the merchant's words (issue 37 §4): money in the currency, times on the merchant's
clock, tuning folded under "Advanced", a home that shows the shop before the plumbing, a drop list
that says what is left and a sales chart that starts at the first sale."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalogue.services import NewVariant
from holds import services as holds
from ops import sales
from tests.checkout.helpers import confirmed_order
from tests.factories import make_buyer, make_drop, staff
from tests.ops.test_sales import sold_at

pytestmark = pytest.mark.django_db(transaction=True)

BERLIN = "Europe/Berlin"
MINOR = re.compile(r"\bminor\b", re.IGNORECASE)


def owner() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("owner", "o@example.com", "pw-pw-pw-pw"))
    return client


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_order_and_its_payment_show_money_in_the_currency_never_minor_units() -> None:
    order = confirmed_order(make_drop(slug="paid", quantity=5), quantity=2)
    client = owner()

    page = client.get(f"/admin/checkout/order/{order.pk}/change/").content.decode()
    payments = client.get("/admin/checkout/payment/").content.decode()
    payment = client.get(f"/admin/checkout/payment/{order.payments.get().pk}/change/").content.decode()

    for shown in (page, payments, payment):
        found = MINOR.search(shown)
        assert found is None, shown[found.start() - 300 : found.end() + 50]
        assert "€20.00" in shown
    assert ">2000<" not in page and ">2000<" not in payments  # no bare number of cents either


@override_settings(TIME_ZONE=BERLIN)
def test_the_lists_show_clock_times_in_the_merchants_zone() -> None:
    starts = datetime(2030, 1, 15, 12, 0, tzinfo=UTC)  # 13:00 in Berlin (CET)
    make_drop(slug="berlin", quantity=5, starts_at=starts, ends_at=starts + timedelta(hours=2))
    order = confirmed_order(make_drop(slug="now", quantity=5), quantity=1)
    client = owner()

    drops = client.get("/admin/shop/drop/").content.decode()
    orders = client.get("/admin/checkout/order/").content.decode()

    assert "2030-01-15 13:00<br>to 15:00" in drops
    assert f"Sale ({timezone.localtime().tzname()})" in drops  # the zone's name now: CET or CEST
    made = timezone.localtime(order.created_at, timezone.get_current_timezone())
    assert made.utcoffset() != timedelta(0)  # the zone is Berlin's, not UTC's
    assert f"{made:%Y-%m-%d %H:%M}" in orders and "UTC" not in orders


def test_the_tuning_fields_are_folded_under_advanced() -> None:
    page = owner().get("/admin/shop/drop/add/").content.decode()

    folded = re.search(r"<details>\s*<summary>.*?Advanced.*?</summary>(.*?)</details>", page, re.S)
    assert folded is not None, "an Advanced section, folded"
    for tuning in (
        "bucket_count",
        "redis_gate",
        "join_work_bits",
        "admission_percent",
        "admission_wave_seconds",
        "line_close_seconds",
        "draw_round_wait_seconds",
    ):
        assert f'name="{tuning}"' in folded.group(1), tuning
    for everyday in ("quantity", "hold_seconds", "per_buyer_limit", "starts_at_0"):
        assert f'name="{everyday}"' in page and f'name="{everyday}"' not in folded.group(1), everyday


def test_the_home_shows_the_shop_and_the_plumbing_only_to_who_may_see_it(roles: None) -> None:
    drop = make_drop(slug="home", title="Home run", quantity=5)
    merchant = staff("mona", "Merchants")

    mine = logged_in(merchant).get("/admin/").content.decode()
    assert 'id="home-shop"' in mine
    for link in ("/admin/shop/drop/", "/admin/checkout/order/", "/admin/shop/drop/dashboard/"):
        assert f'href="{link}"' in mine, link
    assert 'href="/admin/checkout/order/?refunds=some"' in mine
    assert f'href="/admin/shop/drop/{drop.pk}/sales/"' in mine and "Sales of Home run" in mine
    assert "Behind the scenes" not in mine and "Outbox" not in mine and "Access attempts" not in mine
    drops, orders, products = (
        mine.index(f'href="/admin/{m}/"') for m in ("shop/drop", "checkout/order", "shop/product")
    )
    assert drops < orders < products  # what a merchant opens most, first

    merchant.user_permissions.add(Permission.objects.get(codename="view_outboxmessage"))
    granted = logged_in(get_user_model().objects.get(pk=merchant.pk)).get("/admin/").content.decode()
    plumbing = granted[granted.index('id="home-plumbing"') :]
    assert "Outbox messages" in plumbing and "Access attempts" not in granted

    everything = owner().get("/admin/").content.decode()
    shop, plumbing = everything.split('id="home-plumbing"')
    for name in ("Access attempts", "Outbox messages", "Pause events", "API tokens", "Users"):
        assert name in plumbing and name not in shop, name
    assert 'href="/admin/shop/drop/"' in shop and 'href="/admin/shop/drop/"' not in plumbing


def test_a_refunds_link_lists_the_orders_with_a_refund() -> None:
    client = owner()
    refunded = confirmed_order(make_drop(slug="back", quantity=5), quantity=1)
    kept = confirmed_order(make_drop(slug="kept", quantity=5), quantity=1)
    type(refunded).objects.filter(pk=refunded.pk).update(refunded_quantity=1, refunded_minor=1000)

    page = client.get("/admin/checkout/order/?refunds=some").content.decode()

    assert f"/admin/checkout/order/{refunded.pk}/change/" in page
    assert f"/admin/checkout/order/{kept.pk}/change/" not in page


def test_the_drop_list_says_what_is_left_of_each_size_and_links_the_sales_page() -> None:
    drop = make_drop(slug="sized", quantity=8, variants=[NewVariant("S", 5), NewVariant("M", 3)])
    holds.reserve(
        drop=drop,
        buyer_id=make_buyer().pk,
        quantity=2,
        idempotency_key="k",
        variant=drop.variants.get(name="M"),
    )
    one = make_drop(slug="plain", quantity=400, buckets=4)

    page = owner().get("/admin/shop/drop/").content.decode()

    assert "6 of 8 left" in page and "400 of 400 left" in page
    assert '<span class="fg-size-left" data-variant="S">S: 5</span>' in page
    assert '<span class="fg-size-left" data-variant="M">M: 1</span>' in page
    for shown in (drop, one):
        assert f'href="/admin/shop/drop/{shown.pk}/sales/"' in page


@override_settings(TIME_ZONE=BERLIN)
def test_the_sales_page_says_clock_times_and_money_and_its_chart_starts_at_the_first_sale(
    roles: None,
) -> None:
    now = timezone.now()
    drop = make_drop(quantity=5, starts_at=now - timedelta(hours=1), ends_at=now + timedelta(hours=1))
    sold_at(drop, [600.0, 660.0, 720.0])  # the first sale ten minutes after the start

    found = sales.sales(drop)
    page = logged_in(staff("mae", "Merchants")).get(f"/admin/shop/drop/{drop.pk}/sales/").content.decode()

    points = [tuple(map(float, p.split(","))) for p in found.units_path.split()]
    assert points[0] == (0.0, sales.HEIGHT)  # the line leaves 0 at the first sale...
    assert points[1][0] < sales.WIDTH / 10  # ...and rises within its slot, not from the drop's start
    first = timezone.localtime(drop.starts_at + timedelta(seconds=600))
    assert first.utcoffset() != timedelta(0)
    assert found.first_sale_at == drop.starts_at + timedelta(seconds=600)
    assert f'id="sales-axis-start">{first:%H:%M:%S}<' in page
    assert f"the first at {first:%-d %b, %H:%M:%S} {first.tzname()}" in page and "+10 minutes" in page
    assert "after the start" not in page and not MINOR.search(page)
    assert "<td>€49.00</td>" in page


def test_a_german_merchant_reads_the_new_words_in_german() -> None:
    drop = make_drop(slug="deutsch", quantity=5)
    client = owner()
    client.cookies["django_language"] = "de"

    home = client.get("/admin/").content.decode()
    change = client.get(f"/admin/shop/drop/{drop.pk}/change/").content.decode()
    drops = client.get("/admin/shop/drop/").content.decode()

    assert "Ihr Shop" in home and "Hinter den Kulissen" in home and "Behind the scenes" not in home
    assert "Erweitert" in change and ">Advanced<" not in change
    assert "5 von 5 übrig" in drops and ">Verlauf</a>" in drops


@override_settings(TIME_ZONE=BERLIN)
def test_the_dashboard_tells_the_time_on_the_merchants_clock() -> None:
    drop = make_drop(slug="watched", quantity=5)
    client = owner()
    client.post(f"/admin/shop/drop/{drop.pk}/pause/", {"reason": "a look"})

    snap = client.get("/admin/shop/drop/dashboard/data/").json()

    now = timezone.localtime()
    assert snap["zone"] == now.tzname() and snap["at"].endswith(now.isoformat()[-6:])  # "+01:00"
    assert snap["drops"][0]["events"][0]["at"].endswith(now.isoformat()[-6:])


def test_what_is_left_costs_the_drop_list_one_query_however_many_drops() -> None:
    client = owner()
    make_drop(slug="one", quantity=5, variants=[NewVariant("S", 2), NewVariant("M", 3)])

    def queries() -> int:
        with CaptureQueriesContext(connection) as seen:
            assert client.get("/admin/shop/drop/").status_code == 200
        return len(seen.captured_queries)

    queries()  # the first page of a session also records its language
    few = queries()
    for n in range(4):
        make_drop(slug=f"more-{n}", quantity=5, variants=[NewVariant("S", 2), NewVariant("M", 3)])

    assert queries() == few
