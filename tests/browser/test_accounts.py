"""A buyer's account in a real browser against a real server: sign up by e-mail, open the link the
server mailed, log out and in, forget the password and set a new one; and the API docs page.

The server (live_daphne) writes mail with Django's file backend into .data/test/mail/; the test
reads the message there, across processes, as a person reads their inbox.
"""

from __future__ import annotations

import email
import email.policy
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model

from tests.conftest import TEST_DATA
from tests.factories import make_buyer

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MAILDIR = TEST_DATA / "mail"
PASSWORD = "a sturdy passphrase 42"


def mails_to(address: str) -> list[email.message.EmailMessage]:
    """Every message the server wrote to `address`, oldest first."""
    found = []
    for path in sorted(MAILDIR.glob("*.log"), key=lambda p: p.stat().st_mtime) if MAILDIR.exists() else []:
        for raw in path.read_text(errors="replace").split("-" * 79):
            if raw.strip():
                message = email.message_from_string(raw.strip(), policy=email.policy.default)
                if address in str(message["To"]):
                    found.append(message)
    return found


def link_mailed_to(address: str, kind: str, already: int = 0, timeout: float = 15) -> str:
    """The link (path only) in the newest message to `address` after the first `already`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        messages = mails_to(address)
        if len(messages) > already:
            plain = messages[-1].get_body(preferencelist=("plain",))
            assert plain is not None
            body = plain.get_content()
            found = re.search(rf"https?://[^/\s]+(/accounts/{kind}/\S+)", body)
            assert found, body
            return found.group(1)
        time.sleep(0.2)
    raise AssertionError(f"no new mail to {address} in {Path(MAILDIR)}")


def log_in(page: Page, base: str, login: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.get_by_label("E-mail").fill(login)
    page.get_by_label(re.compile(r"^Password:?$")).fill(password)
    page.get_by_role("button", name="Log in").click()


def test_a_buyer_signs_up_verifies_by_the_mailed_link_logs_in_and_resets_the_password(
    live_daphne: str, page: Page
) -> None:
    address = f"nina-{time.time_ns()}@example.com"  # the mail folder outlives a test

    # sign up: asked for an e-mail address, told to open the link
    page.goto(f"{live_daphne}/")
    page.get_by_role("link", name="Sign up").click()
    page.get_by_label("E-mail").fill(address)
    page.get_by_label(re.compile(r"^Password:?$")).fill(PASSWORD)
    page.get_by_label("Password (again)").fill(PASSWORD)
    page.get_by_role("button", name="Sign up").click()
    page.wait_for_url(re.compile(r"/accounts/confirm-email/$"))
    assert page.locator("a.brand").inner_text() == "Floodgate"  # the shop's own layout
    assert page.get_by_role("button", name="Log out").count() == 0  # not logged in yet

    # open the link from the mail and confirm: verified and logged in
    page.goto(live_daphne + link_mailed_to(address, "confirm-email"))
    page.get_by_role("button", name="Confirm").click()
    page.wait_for_url(re.compile(r"/$"))
    assert page.locator("header nav").get_by_text(address).count() == 1  # the nav names the account
    assert EmailAddress.objects.get(email=address).verified

    # log out, and back in with the e-mail address
    page.get_by_role("button", name="Log out").click()
    page.wait_for_selector("text=Log in")
    log_in(page, live_daphne, address, PASSWORD)
    page.wait_for_url(re.compile(r"/$"))
    assert page.get_by_role("button", name="Log out").count() == 1

    # forget it: the reset link arrives by mail, the new password works and the old one does not
    page.get_by_role("button", name="Log out").click()
    page.goto(f"{live_daphne}/accounts/login/")
    page.get_by_role("link", name="Forgot your password?").click()
    page.get_by_label("E-mail").fill(address)
    page.get_by_role("button", name=re.compile("Reset My Password", re.I)).click()
    page.wait_for_url(re.compile(r"/accounts/password/reset/done/$"))
    page.goto(live_daphne + link_mailed_to(address, "password/reset/key", already=1))
    new = "another sturdy passphrase 7"
    page.get_by_label(re.compile(r"^New Password:?$")).fill(new)
    page.get_by_label("New Password (again)").fill(new)
    page.get_by_role("button", name=re.compile("Change Password", re.I)).click()
    page.wait_for_url(re.compile(r"/accounts/password/reset/key/done/$"))
    user = get_user_model().objects.get(email=address)
    assert user.check_password(new) and not user.check_password(PASSWORD)
    log_in(page, live_daphne, address, PASSWORD)
    assert page.get_by_text("not correct").count() == 1
    log_in(page, live_daphne, address, new)
    page.wait_for_url(re.compile(r"/$"))
    assert page.get_by_role("button", name="Log out").count() == 1


def test_a_buyer_makes_an_api_token_on_the_account_page(live_daphne: str, page: Page) -> None:
    make_buyer("tom", email="tom@example.com")
    log_in(page, live_daphne, "tom@example.com", "correct horse battery")
    page.wait_for_url(re.compile(r"/$"))

    assert page.get_by_role("link", name="API access").count() == 0  # not every buyer's business
    page.get_by_role("link", name="Orders", exact=True).click()
    page.get_by_role("link", name="API access").click()
    page.get_by_role("button", name="Create a token").click()
    token = page.locator("#api-token").inner_text()

    answer = page.request.get(f"{live_daphne}/api/me", headers={"Authorization": f"Bearer {token}"})
    assert answer.status == 200 and answer.json() == {"username": "tom"}
    page.get_by_role("button", name="Revoke the token").click()
    page.wait_for_selector("text=You have no API token")
    refused = page.request.get(f"{live_daphne}/api/me", headers={"Authorization": f"Bearer {token}"})
    assert refused.status == 401


def test_the_api_docs_page_renders_the_published_schema(live_daphne: str, page: Page) -> None:
    page.goto(f"{live_daphne}/")
    page.get_by_role("link", name="API docs").click()

    # Swagger UI drew the schema's own title and its operations
    page.wait_for_selector(".swagger-ui .info .title")
    schema = page.request.get(f"{live_daphne}/api/openapi.json").json()
    assert schema["info"]["title"] in page.locator(".swagger-ui .info .title").inner_text()
    assert page.locator(".opblock").count() >= len(schema["paths"])
