"""Lockouts and limits that know the client (issue 43): one lockout for the admin and the shop's
login, by address and by account in any spelling, refused before any password hash; the client's
address taken from the right X-Forwarded-For entry for each proxy layout."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.hashers import MD5PasswordHasher
from django.contrib.auth.models import User
from django.test import Client, override_settings

from tests.factories import make_buyer

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

pytestmark = pytest.mark.django_db

RIGHT = "correct horse battery"
LIMIT = 5  # ADMIN_LOGIN_FAILURE_LIMIT's default, which the test settings keep


@pytest.fixture
def ops() -> User:
    user = make_buyer("ops", email="ops@example.com")
    user.is_staff = True
    user.save()
    return user


def admin_login(client: Client, login: str, password: str, **extra: Any) -> TestResponse:
    return client.post("/admin/login/?next=/admin/", {"username": login, "password": password}, **extra)


def shop_login(client: Client, login: str, password: str, **extra: Any) -> TestResponse:
    return client.post("/accounts/login/", {"username": login, "password": password}, **extra)


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


# --- one lockout, by address and by account, in any spelling -------------------------------------


def test_after_the_admin_lockout_the_shop_login_answers_no_spelling_of_a_staff_name(ops: User) -> None:
    """The probe: "OPS" at the shop login after the admin lockout told a right password (a redirect
    to the admin's login) from a wrong one (the form again): a password oracle."""
    client = Client()
    for _ in range(LIMIT):
        admin_login(client, "ops", "guess")

    right = [shop_login(client, name, RIGHT) for name in ("OPS", "Ops", "ops@EXAMPLE.com")]
    wrong = shop_login(client, "OPS", "guess")

    assert [answer.status_code for answer in right] == [429, 429, 429]
    assert wrong.status_code == 429  # the same answer, right password or not
    assert not logged_in(client)


def test_an_account_is_locked_whatever_address_the_guesses_come_from(ops: User) -> None:
    for n in range(LIMIT):  # a botnet: one wrong password per address, in varied spellings
        admin_login(Client(), ("ops", "OPS", "Ops", "oPs", "OpS")[n], "guess", REMOTE_ADDR=f"198.51.100.{n}")

    at_admin = admin_login(Client(), "ops", RIGHT, REMOTE_ADDR="192.0.2.7")
    at_shop = shop_login(Client(), "ops@example.com", RIGHT, REMOTE_ADDR="192.0.2.8")

    assert (at_admin.status_code, at_shop.status_code) == (429, 429)
    assert set(AccessAttempt.objects.values_list("username", flat=True)) == {"ops"}  # one account


def test_control_other_accounts_and_addresses_are_not_locked_by_one_accounts_guesses(ops: User) -> None:
    other = make_buyer("eve")
    other.is_staff = True
    other.save()
    for n in range(LIMIT):
        admin_login(Client(), "ops", "guess", REMOTE_ADDR=f"198.51.100.{n}")

    client = Client(REMOTE_ADDR="192.0.2.7")
    assert admin_login(client, "eve", RIGHT).status_code == 302 and logged_in(client)


def test_a_staff_member_cannot_guess_a_colleagues_password_between_their_own_logins(ops: User) -> None:
    """The probe: each right login of one's own wiped the address's failures, so a colleague's
    password could be guessed four at a time, forever."""
    eve = make_buyer("eve")
    eve.is_staff = True
    eve.save()
    for _ in range(2):
        for _ in range(2):
            admin_login(Client(), "ops", "guess")
        assert admin_login(Client(), "eve", RIGHT).status_code == 302  # their own login, between
    admin_login(Client(), "ops", "guess")

    answer = admin_login(Client(), "ops", RIGHT)

    assert answer.status_code == 429  # five failures from this address and for ops: locked


# --- no password hash for a locked attempt ---------------------------------------------------------


class CountingHasher(MD5PasswordHasher):
    """MD5 (the test settings' hasher) that counts every hash it computes."""

    algorithm = "counted_md5"  # its own name: Django finds a stored hash's hasher by it
    computed = 0

    def encode(self, password: str, salt: str) -> str:
        CountingHasher.computed += 1
        return super().encode(password, salt)


@pytest.fixture
def counted(ops: User) -> Iterator[type[CountingHasher]]:
    hashers = [f"{__name__}.CountingHasher", *settings.PASSWORD_HASHERS]
    with override_settings(PASSWORD_HASHERS=hashers):
        ops.set_password(RIGHT)
        ops.save()
        CountingHasher.computed = 0
        yield CountingHasher


def test_a_locked_account_or_address_is_refused_before_any_password_is_hashed(
    counted: type[CountingHasher],
) -> None:
    client = Client()
    for _ in range(LIMIT):
        admin_login(client, "ops", "guess")
    hashed_while_locking = counted.computed

    answers = [
        admin_login(client, "ops", RIGHT),  # the address and the account
        admin_login(client, "nobody", "guess"),  # the address
        shop_login(client, "OPS", RIGHT),  # the account, spelled otherwise, at the shop
        admin_login(Client(), "Ops", "guess", REMOTE_ADDR="192.0.2.99"),  # the account elsewhere
    ]

    assert [a.status_code for a in answers] == [429] * 4
    assert counted.computed == hashed_while_locking  # not one hash for a refused attempt
    assert hashed_while_locking >= LIMIT  # control: a failure that counts does hash


# --- who the client is, per proxy layout -----------------------------------------------------------

CLIENT, SPOOF = "203.0.113.9", "6.6.6.6"
TLS_PROXY, HAPROXY = "10.0.0.2", "10.0.0.3"  # what each proxy is connected from


@pytest.mark.parametrize(
    ("layout", "hops", "remote", "forwarded"),
    [
        # the client itself connects; what it sends in X-Forwarded-For is its own invention
        ("direct", 0, CLIENT, SPOOF),
        # HAProxy appends the client's address to whatever the client sent
        ("HAProxy only", 1, HAPROXY, f"{SPOOF}, {CLIENT}"),
        # the TLS proxy appends the client's, then HAProxy the TLS proxy's (compose's shape)
        ("TLS proxy + HAProxy", 2, HAPROXY, f"{SPOOF}, {CLIENT}, {TLS_PROXY}"),
    ],
)
def test_each_layout_finds_the_client_not_a_proxy_nor_a_spoof(
    layout: str, hops: int, remote: str, forwarded: str
) -> None:
    from core import clients

    with override_settings(TRUSTED_PROXY_HOPS=hops, TRUST_X_FORWARDED_FOR=hops > 0):
        assert clients.client_address(remote, forwarded) == CLIENT, layout
        assert clients.client_address(remote, None) == remote  # a request no proxy forwarded


def test_control_a_spoofed_or_short_header_never_picks_the_address_the_client_wrote() -> None:
    from core import clients

    with override_settings(TRUSTED_PROXY_HOPS=2, TRUST_X_FORWARDED_FOR=True):
        # the client's own entry is left of the trusted ones, whatever it wrote
        assert clients.client_address(HAPROXY, f"{CLIENT}, {SPOOF}, {CLIENT}, {TLS_PROXY}") == CLIENT
        assert clients.client_address(HAPROXY, CLIENT) == HAPROXY  # fewer entries than proxies
        assert clients.client_address(HAPROXY, f"{SPOOF}, not-an-address, {TLS_PROXY}") == HAPROXY
        assert clients.client_address(HAPROXY, f"{SPOOF}, [2001:DB8::1]:443, {TLS_PROXY}") == "2001:db8::1"
    with override_settings(TRUSTED_PROXY_HOPS=1, TRUST_X_FORWARDED_FOR=True):
        # one hop trusted behind two proxies: the TLS proxy, which is what the probe found
        assert clients.client_address(HAPROXY, f"{CLIENT}, {TLS_PROXY}") == TLS_PROXY


@override_settings(TRUSTED_PROXY_HOPS=2, TRUST_X_FORWARDED_FOR=True)
def test_behind_tls_and_haproxy_one_persons_wrong_passwords_do_not_lock_the_admin_out(ops: User) -> None:
    """The probe: keyed to the TLS proxy, five wrong passwords from anyone locked everyone out."""
    stranger = {"REMOTE_ADDR": HAPROXY, "HTTP_X_FORWARDED_FOR": f"{SPOOF}, 198.51.100.1, {TLS_PROXY}"}
    merchant = {"REMOTE_ADDR": HAPROXY, "HTTP_X_FORWARDED_FOR": f"192.0.2.50, {TLS_PROXY}"}
    for _ in range(LIMIT):
        admin_login(Client(), "nobody", "guess", **stranger)

    client = Client()
    answer = admin_login(client, "ops", RIGHT, **merchant)

    assert answer.status_code == 302 and logged_in(client)
    assert list(AccessAttempt.objects.values_list("ip_address", flat=True)) == ["198.51.100.1"]
    assert admin_login(Client(), "ops", RIGHT, **stranger).status_code == 429  # the stranger is locked


@pytest.mark.servers
def test_trust_x_forwarded_for_still_means_one_proxy_and_a_bad_count_is_refused() -> None:
    from tests.test_settings import PRODUCTION, manage, settings_values

    older = settings_values({**PRODUCTION, "TRUST_X_FORWARDED_FOR": "1"}, "TRUSTED_PROXY_HOPS")
    compose = settings_values({**PRODUCTION, "TRUSTED_PROXY_HOPS": "2"}, "SECURE_PROXY_SSL_HEADER")
    refused = manage({**PRODUCTION, "TRUSTED_PROXY_HOPS": "-1"}, "check")

    assert older == ["1"]
    assert compose == ["('HTTP_X_FORWARDED_PROTO', 'https')"]
    assert refused.returncode != 0 and "TRUSTED_PROXY_HOPS=-1 is not a count of proxies" in refused.stderr


@override_settings(
    TRUSTED_PROXY_HOPS=2, TRUST_X_FORWARDED_FOR=True, IP_RATE_LIMIT_BURST=1, IP_RATE_LIMIT_PER_SECOND=0.01
)
def test_behind_tls_and_haproxy_the_rate_limits_count_each_client_not_the_proxy() -> None:
    """The same function keys the reserve's per-address limit: before, every buyer was the TLS proxy."""
    from tests.admission.test_limits import assert_limited, bearer, post_hold
    from tests.factories import make_drop

    make_drop(slug="proxied-twice", quantity=10)
    a, b, c = (bearer(name) for name in ("a", "b", "c"))

    first = post_hold("proxied-twice", a, 1, key="k", HTTP_X_FORWARDED_FOR=f"198.51.100.1, {TLS_PROXY}")
    spoofed = post_hold(
        "proxied-twice", b, 1, key="k", HTTP_X_FORWARDED_FOR=f"{SPOOF}, 198.51.100.1, {TLS_PROXY}"
    )
    other = post_hold("proxied-twice", c, 1, key="k", HTTP_X_FORWARDED_FOR=f"198.51.100.2, {TLS_PROXY}")

    assert first.status_code == 201
    assert_limited(spoofed)  # the same client, whatever it wrote in front
    assert other.status_code == 201  # another client behind the same proxies
