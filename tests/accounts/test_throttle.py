"""Login and sign-up throttles: the admin (django-axes) and the shop's pages (allauth, on Redis)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client

from tests.factories import make_buyer

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

pytestmark = pytest.mark.django_db

RIGHT = "correct horse battery"


@pytest.fixture
def staff() -> User:
    user = make_buyer("ops")
    user.is_staff = True
    user.save()
    return user


def admin_login(client: Client, password: str) -> TestResponse:
    return client.post("/admin/login/?next=/admin/", {"username": "ops", "password": password})


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_control_fewer_wrong_admin_passwords_than_the_limit_still_let_the_right_one_in(staff: User) -> None:
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert admin_login(client, "guess").status_code == 200

    answer = admin_login(client, RIGHT)

    assert answer.status_code == 302 and logged_in(client)


def test_the_nth_wrong_admin_password_locks_the_address_out_even_with_the_right_one(staff: User) -> None:
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        admin_login(client, "guess")

    answer = admin_login(client, RIGHT)

    assert answer.status_code == 429
    assert not logged_in(client)
    html = answer.content.decode()
    assert "Too many failed logins" in html and "Try again later" in html
    assert "refused for 15 minutes" in html  # how long, in words a person can act on
    # another browser on the same address is refused too: the lock is the address's
    assert admin_login(Client(), RIGHT).status_code == 429


def test_wrong_shop_logins_and_bearer_tokens_are_not_counted_against_the_admin(staff: User) -> None:
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT + 2):
        client.post("/accounts/login/", {"username": "nobody@example.com", "password": "guess"})
        client.get("/api/me", HTTP_AUTHORIZATION="Bearer not-a-token")

    assert AccessAttempt.objects.count() == 0
    assert admin_login(client, RIGHT).status_code == 302


def test_wrong_shop_passwords_for_one_account_lock_its_login_for_a_while() -> None:
    make_buyer("pat", email="pat@example.com")
    client = Client()
    for _ in range(5):  # ACCOUNT_RATE_LIMITS login_failed: 5 per 5 minutes per account
        answer = client.post("/accounts/login/", {"username": "pat@example.com", "password": "guess"})
        assert b"not correct" in answer.content

    answer = client.post("/accounts/login/", {"username": "pat@example.com", "password": RIGHT})

    assert not logged_in(client)
    assert b"Too many failed login attempts" in answer.content


def test_control_a_right_shop_password_after_a_few_wrong_ones_logs_in() -> None:
    make_buyer("quin", email="quin@example.com")
    client = Client()
    for _ in range(4):
        client.post("/accounts/login/", {"username": "quin@example.com", "password": "guess"})

    client.post("/accounts/login/", {"username": "quin@example.com", "password": RIGHT})

    assert logged_in(client)


def test_sign_up_is_limited_per_address() -> None:
    def sign_up(email: str) -> TestResponse:
        word = "a sturdy passphrase 42"
        return Client().post("/accounts/signup/", {"email": email, "password1": word, "password2": word})

    for n in range(3):  # SIGNUP_RATE_LIMIT: 3 a minute, 10 an hour per address
        assert sign_up(f"crowd{n}@example.com").status_code == 302

    answer = sign_up("crowd9@example.com")

    assert answer.status_code == 429
    assert b"Too many tries" in answer.content and b"Wait a few minutes" in answer.content
    assert get_user_model().objects.count() == 3
    assert len(mail.outbox) == 3


def test_password_reset_mails_are_limited_per_address() -> None:
    make_buyer("vic", email="vic@example.com")
    client = Client()
    for _ in range(3):  # 3 an hour per e-mail address
        client.post("/accounts/password/reset/", {"email": "vic@example.com"})

    answer = client.post("/accounts/password/reset/", {"email": "vic@example.com"})

    assert len(mail.outbox) == 3
    assert answer.status_code in (200, 429) and b"too many" in answer.content.lower()


def shop_login(client: Client, password: str, login: str = "ops") -> TestResponse:
    return client.post("/accounts/login/", {"username": login, "password": password})


def test_the_admin_lockout_holds_at_the_shop_login_too(staff: User) -> None:
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        admin_login(client, "guess")

    answer = shop_login(client, RIGHT)

    assert answer.status_code == 429 and not logged_in(client)
    assert client.get("/admin/").status_code == 302  # to the login: the admin stays shut


def test_wrong_shop_passwords_for_a_staff_account_count_toward_the_admin_lockout(staff: User) -> None:
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        shop_login(client, "guess", login="ops@example.com")

    assert AccessAttempt.objects.count() == 1  # one row for the address, its failures counted
    assert admin_login(client, RIGHT).status_code == 429


def test_staff_with_the_right_password_are_sent_to_the_admin_login_unsigned(staff: User) -> None:
    client = Client()

    answer = shop_login(client, RIGHT)

    assert answer.status_code == 302 and answer["Location"].startswith("/admin/login/")
    assert not logged_in(client)
    page = client.get(answer["Location"]).content.decode()
    assert "Staff accounts sign in at the admin&#x27;s login page." in page or "admin's login page" in page
    assert admin_login(client, RIGHT).status_code == 302 and logged_in(client)  # there, they can
