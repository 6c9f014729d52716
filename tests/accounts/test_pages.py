"""Buyer accounts (allauth) in the shop's look: sign-up by e-mail, verification, login, logout, reset."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

from catalogue.services import create_buyers
from tests.factories import make_buyer

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

pytestmark = pytest.mark.django_db

PASSWORD = "a sturdy passphrase 42"


def sign_up(client: Client, email: str, path: str = "/accounts/signup/") -> TestResponse:
    return client.post(path, {"email": email, "password1": PASSWORD, "password2": PASSWORD})


def link_in(message: mail.EmailMessage) -> str:
    found = re.search(r"https?://[^/\s]+(/\S+)", str(message.body))
    assert found, message.body
    return found.group(1)


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_sign_up_asks_for_an_e_mail_address_and_sends_a_link_before_any_login() -> None:
    client = Client()

    answer = sign_up(client, "Nora@Example.com")

    assert answer.status_code == 302 and answer["Location"] == "/accounts/confirm-email/"
    user = get_user_model().objects.get()
    assert user.email.lower() == "nora@example.com"
    assert not EmailAddress.objects.get(user=user).verified
    assert not logged_in(client)  # nobody buys with an address nobody has opened
    assert len(mail.outbox) == 1 and mail.outbox[0].to == [user.email]
    assert "Floodgate" in mail.outbox[0].subject


def test_the_link_in_the_e_mail_verifies_the_address_and_logs_in() -> None:
    client = Client()
    sign_up(client, "omar@example.com")
    link = link_in(mail.outbox[0])

    page = client.get(link)  # a link scanner's GET changes nothing; the page posts
    assert page.status_code == 200 and b"omar@example.com" in page.content
    assert not EmailAddress.objects.get(email="omar@example.com").verified
    answer = client.post(link)

    assert answer.status_code == 302
    assert EmailAddress.objects.get(email="omar@example.com").verified
    assert logged_in(client)
    assert b"omar@example.com" in client.get("/").content  # the nav names the account


def test_an_unverified_address_cannot_log_in_and_is_sent_a_fresh_link() -> None:
    make_buyer("uma", email="uma@example.com", verified=False)
    client = Client()

    answer = client.post(
        "/accounts/login/", {"username": "uma@example.com", "password": "correct horse battery"}
    )

    assert not logged_in(client)
    assert answer.status_code == 302 and answer["Location"] == "/accounts/confirm-email/"
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["uma@example.com"]


def test_log_in_by_e_mail_and_log_out() -> None:
    make_buyer("lena", email="lena@example.com")
    client = Client()

    answer = client.post(
        "/accounts/login/?next=/orders/",
        {"username": "LENA@example.com", "password": "correct horse battery"},
    )

    assert answer.status_code == 302 and answer["Location"] == "/orders/"
    assert logged_in(client)
    client.post("/accounts/logout/")
    assert not logged_in(client)
    assert b"Log in" in client.get("/").content


def test_accounts_made_before_e_mail_sign_up_log_in_with_their_username() -> None:
    # create_buyers' buyers (load tests, API scripts) come with a verified address of their own
    buyer = create_buyers(count=1, prefix="script")[0]
    client = Client()

    client.post("/accounts/login/", {"username": buyer.username, "password": buyer.password})

    assert logged_in(client)
    assert EmailAddress.objects.get(email__startswith=buyer.username).verified


def test_login_with_a_wrong_password_is_refused_with_a_message() -> None:
    make_buyer("carol")
    client = Client()

    answer = client.post("/accounts/login/", {"username": "carol@example.com", "password": "wrong"})

    assert answer.status_code == 200
    assert not logged_in(client)
    assert b"not correct" in answer.content


@pytest.mark.parametrize(
    "form",
    [
        {},
        {"email": "", "password1": "", "password2": ""},
        {"email": "not an address", "password1": PASSWORD, "password2": PASSWORD},
        {"email": "a@example.com", "password1": PASSWORD, "password2": PASSWORD + "!"},
        {"email": "a@example.com", "password1": "short", "password2": "short"},
        {"email": "a\x00@example.com", "password1": PASSWORD, "password2": PASSWORD},
        {"email": "a@example.com" * 40, "password1": PASSWORD, "password2": PASSWORD},
    ],
    ids=["nothing", "blank", "not-an-address", "mismatch", "weak-password", "nul", "too-long"],
)
def test_sign_up_with_garbage_says_what_is_wrong_and_creates_nobody(form: dict[str, str]) -> None:
    answer = Client().post("/accounts/signup/", form)

    assert answer.status_code == 200
    assert b"errorlist" in answer.content
    assert get_user_model().objects.count() == 0 and not mail.outbox


def test_signing_up_twice_with_one_address_makes_one_account() -> None:
    sign_up(Client(), "dup@example.com")

    answer = sign_up(Client(), "DUP@example.com")

    # allauth does not tell a stranger the address is taken: it mails its owner instead
    assert answer.status_code == 302
    assert get_user_model().objects.count() == 1


@pytest.mark.parametrize(
    "form",
    [{}, {"username": "", "password": ""}, {"username": "x\x00", "password": "y"}, {"username": "a" * 5000}],
    ids=["nothing", "blank", "nul", "huge"],
)
def test_login_with_garbage_is_a_form_error(form: dict[str, str]) -> None:
    client = Client()

    answer = client.post("/accounts/login/", form)

    assert answer.status_code == 200 and b"errorlist" in answer.content
    assert not logged_in(client)


def test_sign_up_never_redirects_off_site() -> None:
    client = Client()
    sign_up(client, "safe@example.com", "/accounts/signup/?next=https://evil.example/phish")

    answer = client.post(link_in(mail.outbox[0]))

    assert answer.status_code == 302 and "evil.example" not in answer["Location"]


def test_password_reset_by_e_mail_sets_a_new_password() -> None:
    make_buyer("rita", email="rita@example.com")
    client = Client()

    answer = client.post("/accounts/password/reset/", {"email": "rita@example.com"})
    assert answer.status_code == 302
    link = link_in(mail.outbox[0])
    form = client.get(link, follow=True)  # allauth swaps the key for a session and redirects
    new = "a brand new passphrase 7"
    done = client.post(form.redirect_chain[-1][0], {"password1": new, "password2": new})

    assert done.status_code == 302
    assert get_user_model().objects.get(username="rita").check_password(new)
    fresh = Client()
    fresh.post("/accounts/login/", {"username": "rita@example.com", "password": new})
    assert logged_in(fresh)


def test_password_reset_for_an_unknown_address_changes_nothing_and_says_the_same() -> None:
    make_buyer("sam", email="sam@example.com")

    answer = Client().post("/accounts/password/reset/", {"email": "nobody@example.com"})

    assert answer.status_code == 302  # the same answer as for a real address: no account probing
    assert get_user_model().objects.get(username="sam").check_password("correct horse battery")
    assert all("nobody@example.com" not in m.to or "reset" not in m.body.lower() for m in mail.outbox)


@pytest.mark.parametrize(
    "old, new",
    [
        ("/accounts/password_reset/", "/accounts/password/reset/"),
        ("/accounts/password_change/", "/accounts/password/change/"),
        ("/accounts/password_reset/done/", "/accounts/password/reset/done/"),
        ("/accounts/reset/MQ/abc-123/", "/accounts/password/reset/"),
    ],
)
def test_the_old_account_addresses_lead_to_the_new_pages(old: str, new: str) -> None:
    answer = Client().get(old)

    assert answer.status_code == 302 and answer["Location"] == new


@pytest.mark.parametrize(
    "path",
    ["/accounts/login/", "/accounts/signup/", "/accounts/password/reset/", "/accounts/confirm-email/"],
)
def test_account_pages_wear_the_shop_s_layout(path: str) -> None:
    html = Client().get(path).content.decode()

    assert '<a class="brand" href="/">' in html  # templates/base.html
    assert "/static/css/floodgate.css" in html
    assert "admin" not in html.lower()


def test_an_account_from_before_e_mail_sign_up_logs_in_and_is_asked_for_an_address() -> None:
    make_buyer("olga", email="")  # the old sign-up asked only a username
    client = Client()

    answer = client.post(
        "/accounts/login/", {"username": "olga", "password": "correct horse battery"}, follow=True
    )

    assert logged_in(client)
    assert b"has no e-mail address" in answer.content and b'href="/accounts/email/"' in answer.content
    page = client.get("/accounts/email/")
    assert page.status_code == 200 and b'<a class="brand" href="/">' in page.content

    client.post("/accounts/email/", {"email": "olga@example.com", "action_add": ""})

    assert EmailAddress.objects.filter(user__username="olga", email="olga@example.com").exists()
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["olga@example.com"]  # to verify it


def test_account_e_mails_speak_as_the_shop_not_as_allauth() -> None:
    # the sign-up link, a reset, a reset for an unknown address: the shop's words, its sentence case
    sign_up(Client(), "newbie@example.com")
    make_buyer("reset-me", email="reset-me@example.com")
    Client().post("/accounts/password/reset/", {"email": "reset-me@example.com"})
    Client().post("/accounts/password/reset/", {"email": "nobody-here@example.com"})

    subjects = [m.subject for m in mail.outbox]
    assert subjects == [
        "[Floodgate] Confirm your e-mail address",
        "[Floodgate] Reset your password",
        "[Floodgate] No account with this address",
    ], subjects
    for message in mail.outbox:
        assert "Hello from" not in message.body
        assert "Thank you for using" not in message.body and "user newbie" not in message.body
        assert message.body.rstrip().endswith("Floodgate")
        assert "/accounts/" in message.body  # each says where to go
    assert mail.outbox[1].body.startswith("Hello,\n\nyou, or someone who knows your address")


def test_the_login_form_says_e_mail_or_username_keeps_the_box_beside_its_label_and_shows_errors() -> None:
    page = Client().get("/accounts/login/").content.decode()
    assert "E-mail or username" in page and "Or the username of an account" not in page
    assert "Keep me logged in" in page and "Remember Me" not in page

    refused = Client().post("/accounts/login/", {"username": "nobody@example.com", "password": "x"})

    assert '<ul class="errorlist nonfield">' in refused.content.decode()
    css = Path("static/css/floodgate.css").read_text()
    assert ".errorlist.nonfield" in css and 'div:has(> input[type="checkbox"])' in css


def test_allauth_pages_have_headings_in_sentence_case() -> None:
    page = Client().get("/accounts/password/reset/").content.decode()

    flat = re.sub(r"\s+", " ", page)
    assert re.search(r"<h1> ?Password reset ?</h1>", flat) and "Password Reset" not in page, flat[:2000]
    assert re.search(r"<title> ?Password reset ?· Floodgate</title>", flat)
    assert re.search(r"> ?Reset my password ?</button>", flat)


@pytest.mark.parametrize(
    ("path", "formal"),
    [
        ("/accounts/password/reset/", "Geben Sie unten Ihre E-Mail-Adresse ein"),
        ("/accounts/logout/", "Möchten Sie sich wirklich abmelden?"),
    ],
)
def test_allauths_pages_speak_the_shops_formal_german(path: str, formal: str) -> None:
    client = Client()
    if path.endswith("logout/"):
        client.force_login(make_buyer())
    page = client.get(path, HTTP_ACCEPT_LANGUAGE="de-DE,de").content.decode()

    assert formal in page
    informal = re.findall(r"\b(?:du|dein\w*|dich|dir)\b", page, flags=re.IGNORECASE)
    assert not informal, informal
