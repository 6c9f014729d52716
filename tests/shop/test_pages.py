from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from tests.factories import make_buyer, make_drop

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


def test_sign_up_logs_in_and_log_out_logs_out() -> None:
    client = Client()

    answer = client.post(
        "/accounts/signup/",
        {
            "username": "newbuyer",
            "password1": "a sturdy passphrase 42",
            "password2": "a sturdy passphrase 42",
        },
    )
    assert answer.status_code == 302
    assert get_user_model().objects.filter(username="newbuyer").exists()
    assert b"newbuyer" in client.get("/").content

    client.post("/accounts/logout/")
    assert b"Log in" in client.get("/").content


def test_sign_up_with_garbage_shows_errors_and_creates_nobody() -> None:
    answer = Client().post("/accounts/signup/", {"username": "", "password1": "x", "password2": "y"})

    assert answer.status_code == 200
    assert b"errorlist" in answer.content
    assert get_user_model().objects.count() == 0


def test_login_with_a_wrong_password_is_refused() -> None:
    make_buyer("carol")
    client = Client()

    answer = client.post("/accounts/login/", {"username": "carol", "password": "wrong"})

    assert answer.status_code == 200
    assert "_auth_user_id" not in client.session


def test_sign_up_never_redirects_off_site() -> None:
    answer = Client().post(
        "/accounts/signup/?next=https://evil.example/phish",
        {"username": "safe", "password1": "a sturdy passphrase 42", "password2": "a sturdy passphrase 42"},
    )

    assert answer.status_code == 302 and answer["Location"] == "/"


def test_an_unknown_address_is_a_plain_helpful_404() -> None:
    answer = Client().get("/no/such/page/")

    assert answer.status_code == 404
    assert b"There is nothing at this address." in answer.content
    assert b"Resolver404" not in answer.content
