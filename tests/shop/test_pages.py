from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tests.factories import make_drop

pytestmark = pytest.mark.django_db


def test_home_groups_drops_by_state() -> None:
    now = timezone.now()
    make_drop(slug="on-now", product_name="Live Thing")
    make_drop(slug="later", starts_at=now + timedelta(hours=2), product_name="Future Thing")
    make_drop(
        slug="gone",
        starts_at=now - timedelta(days=2),
        ends_at=now - timedelta(days=1),
        product_name="Old Thing",
    )

    html = Client().get("/").content.decode()

    assert html.index("Live now") < html.index("Live Thing")
    assert html.index("Upcoming") < html.index("Future Thing") < html.index("Ended") < html.index("Old Thing")
    assert 'data-countdown="' in html


def test_drop_page_shows_countdown_before_start() -> None:
    drop = make_drop(slug="soon", starts_at=timezone.now() + timedelta(minutes=5))

    html = Client().get("/drops/soon/").content.decode()

    assert f'data-countdown="{drop.starts_at.isoformat()}"' in html
    assert "Goes live in" in html


def test_unknown_drop_page_is_a_helpful_404() -> None:
    answer = Client().get("/drops/does-not-exist/")

    assert answer.status_code == 404
    assert b"does-not-exist" in answer.content
    assert b"See all drops" in answer.content


def test_an_unknown_address_is_a_plain_helpful_404() -> None:
    answer = Client().get("/no/such/page/")

    assert answer.status_code == 404
    assert b"There is nothing at this address." in answer.content
    assert b"Resolver404" not in answer.content
