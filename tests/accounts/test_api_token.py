"""A buyer's own API token: made and revoked on the account's API access page."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from django.contrib.auth.models import User
from django.test import Client

from shop.models import ApiToken
from tests.factories import make_buyer, make_drop
from tests.harness import BODY, call, reserve_headers, run

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_edge")]


def logged_in_buyer(name: str = "tess") -> tuple[Client, User]:
    user = make_buyer(name)
    client = Client()
    client.force_login(user)
    return client, user


def token_on(page: TestResponse) -> str:
    found = re.search(r'<code id="api-token">([^<]+)</code>', page.content.decode())
    assert found, page.content.decode()
    return found.group(1)


def me(token: str) -> TestResponse:
    return Client().get("/api/me", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_the_page_needs_a_login() -> None:
    answer = Client().get("/accounts/api/")

    assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/?next=/accounts/api/")


def test_a_buyer_makes_a_token_that_works_on_the_api_and_is_kept_only_as_a_digest() -> None:
    client, user = logged_in_buyer()
    assert b"You have no API token" in client.get("/accounts/api/").content

    token = token_on(client.post("/accounts/api/", {"action": "create"}))

    answer = me(token)
    assert answer.status_code == 200 and answer.json() == {"username": user.username}
    stored = ApiToken.objects.get(user=user)
    assert stored.digest == ApiToken.digest_of(token) and token not in stored.digest
    again = client.get("/accounts/api/").content.decode()
    assert "You have a token" in again and token not in again  # shown once, never again


def test_a_revoked_token_is_refused_at_once() -> None:
    client, _ = logged_in_buyer()
    token = token_on(client.post("/accounts/api/", {"action": "create"}))
    assert me(token).status_code == 200

    answer = client.post("/accounts/api/", {"action": "revoke"}, follow=True)

    assert b"revoked" in answer.content and b"You have no API token" in answer.content
    refused = me(token)
    assert refused.status_code == 401 and refused.json()["error"] == "unauthenticated"
    assert not ApiToken.objects.exists()


def test_a_new_token_retires_the_old_one() -> None:
    client, _ = logged_in_buyer()
    old = token_on(client.post("/accounts/api/", {"action": "create"}))

    new = token_on(client.post("/accounts/api/", {"action": "create"}))

    assert new != old
    assert me(old).status_code == 401 and me(new).status_code == 200
    assert ApiToken.objects.count() == 1


def test_one_buyer_s_page_never_touches_another_s_token() -> None:
    ann, _ = logged_in_buyer("ann")
    bob, _ = logged_in_buyer("bob")
    anns = token_on(ann.post("/accounts/api/", {"action": "create"}))

    bob.post("/accounts/api/", {"action": "revoke"})
    token_on(bob.post("/accounts/api/", {"action": "create"}))

    assert me(anns).status_code == 200 and ApiToken.objects.count() == 2


@pytest.mark.parametrize(
    "form",
    [{}, {"action": ""}, {"action": "delete-everything"}, {"action": "create\x00"}, {"action": "x" * 10_000}],
    ids=["nothing", "blank", "unknown", "nul", "huge"],
)
def test_garbage_on_the_page_says_so_and_changes_nothing(form: dict[str, str]) -> None:
    client, _ = logged_in_buyer()
    token = token_on(client.post("/accounts/api/", {"action": "create"}))

    answer = client.post("/accounts/api/", form, follow=True)

    assert answer.status_code == 200 and b"nothing was changed" in answer.content
    assert me(token).status_code == 200 and ApiToken.objects.count() == 1


def test_revoking_without_a_token_says_there_was_none() -> None:
    client, _ = logged_in_buyer()

    answer = client.post("/accounts/api/", {"action": "revoke"}, follow=True)

    assert b"You had no API token" in answer.content


def test_the_page_refuses_a_post_without_its_csrf_token() -> None:
    user = make_buyer("cara")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    answer = client.post("/accounts/api/", {"action": "create"})

    assert answer.status_code == 403 and not ApiToken.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_claim_lane_forgets_a_revoked_token_at_once() -> None:
    # The lane caches a token's account for AUTH_SECONDS; revoking in this process drops it.
    make_drop(slug="lane-revoke", quantity=5)
    client, _ = logged_in_buyer("lara")
    token = token_on(client.post("/accounts/api/", {"action": "create"}))
    auth = {"authorization": f"Bearer {token}"}
    path = "/api/drops/lane-revoke/holds"

    first = run(lambda: call("POST", path, headers=reserve_headers(auth, key="k1"), body=BODY))
    assert first.status == 201 and first.headers.get("x-floodgate-lane") == "hit"  # cached now
    client.post("/accounts/api/", {"action": "revoke"})
    after = run(lambda: call("POST", path, headers=reserve_headers(auth, key="k2"), body=BODY))

    assert after.status == 401 and after.json()["error"] == "unauthenticated"
