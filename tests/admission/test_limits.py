"""Rate limits per account and per address: 429 with Retry-After, nothing changed; Redis gone is 503."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, override_settings

from admission import services as admission
from admission.models import Ticket
from devtools.embedded import start_redis
from holds.counts import invariant
from holds.models import Hold
from shop.models import ApiToken
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db

SLOW = 0.01  # tokens per second: nothing refills while a test runs


def bearer(username: str) -> dict[str, Any]:  # the test client's WSGI extras (typed Any)
    user = make_buyer(username)
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(f"token-{username}"))
    return {"HTTP_AUTHORIZATION": f"Bearer token-{username}"}


def post_hold(slug: str, auth: dict[str, Any], quantity: int, key: str, **extra: Any):
    return Client().post(
        f"/api/drops/{slug}/holds",
        data=json.dumps({"quantity": quantity}),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=key,
        **auth,
        **extra,
    )


def assert_limited(answer) -> None:
    assert answer.status_code == 429, answer.content
    assert answer.json()["error"] == "rate_limited" and answer.json()["detail"]
    assert int(answer["Retry-After"]) >= 1


@override_settings(RATE_LIMIT_PER_SECOND=SLOW)
def test_the_eleventh_burst_request_of_an_account_is_429_and_changes_nothing() -> None:
    drop = make_drop(slug="limited", quantity=10, per_buyer_limit=2)
    auth = bearer("ann")

    # Requests refused for their body still count: the limit is on attempts.
    burst = [post_hold("limited", auth, 0, key=f"k{i}") for i in range(settings.RATE_LIMIT_BURST)]
    refused = post_hold("limited", auth, 1, key="real")

    assert settings.RATE_LIMIT_BURST == 10
    assert [a.status_code for a in burst] == [422] * 10
    assert_limited(refused)
    assert not Hold.objects.exists()
    assert invariant(drop_id=drop.pk).available == 10


# One token a second: the burst and the refused third need only come within a second of each
# other (at 5 a second a slow first request on a busy CI machine let the third through).
@override_settings(RATE_LIMIT_BURST=2, RATE_LIMIT_PER_SECOND=1)
def test_the_bucket_refills_at_its_rate() -> None:
    make_drop(slug="refill", quantity=10)
    auth = bearer("ann")

    first = [post_hold("refill", auth, 0, key=f"k{i}").status_code for i in range(2)]
    refused = post_hold("refill", auth, 0, key="k2")
    time.sleep(1.2)  # a token is back after 1 s
    again = post_hold("refill", auth, 0, key="k3")

    assert first == [422, 422]
    assert_limited(refused)
    assert refused["Retry-After"] == "1"
    assert again.status_code == 422


@override_settings(IP_RATE_LIMIT_BURST=3, IP_RATE_LIMIT_PER_SECOND=SLOW)
def test_one_address_is_limited_across_accounts() -> None:
    drop = make_drop(slug="shared", quantity=10)
    auths = [bearer(f"n{i}") for i in range(4)]

    allowed = [post_hold("shared", a, 1, key="k", REMOTE_ADDR="10.1.1.1") for a in auths[:3]]
    refused = post_hold("shared", auths[3], 1, key="k", REMOTE_ADDR="10.1.1.1")
    elsewhere = post_hold("shared", auths[3], 1, key="k", REMOTE_ADDR="10.1.1.2")

    assert [a.status_code for a in allowed] == [201] * 3
    assert_limited(refused)
    assert elsewhere.status_code == 201
    assert Hold.objects.count() == 4 and invariant(drop_id=drop.pk).held == 4


@override_settings(
    IP_RATE_LIMIT_BURST=5, IP_RATE_LIMIT_PER_SECOND=SLOW, RATE_LIMIT_BURST=2, RATE_LIMIT_PER_SECOND=SLOW
)
def test_a_refused_request_takes_nothing_from_the_other_bucket() -> None:
    """One account hammering alone must not use up the address its neighbours share."""
    make_drop(slug="neighbours", quantity=10)
    hammer = bearer("hammer")
    others = [bearer(f"o{i}") for i in range(4)]

    hammered = [post_hold("neighbours", hammer, 0, key=f"k{i}").status_code for i in range(6)]
    neighbours = [post_hold("neighbours", a, 1, key="k").status_code for a in others]

    assert hammered == [422, 422, 429, 429, 429, 429]
    assert neighbours == [201, 201, 201, 429]  # 5 for the address: 2 for the hammer, 3 for them


@override_settings(TRUST_X_FORWARDED_FOR=True, IP_RATE_LIMIT_BURST=1, IP_RATE_LIMIT_PER_SECOND=SLOW)
def test_behind_a_proxy_the_address_it_appended_is_the_one_limited() -> None:
    make_drop(slug="proxied", quantity=10)
    a, b, c = (bearer(n) for n in "abc")

    first = post_hold("proxied", a, 1, key="k", HTTP_X_FORWARDED_FOR="6.6.6.6, 10.0.0.9")
    spoofed = post_hold("proxied", b, 1, key="k", HTTP_X_FORWARDED_FOR="7.7.7.7, 10.0.0.9")
    other = post_hold("proxied", c, 1, key="k", HTTP_X_FORWARDED_FOR="10.0.0.10")

    assert first.status_code == 201
    assert_limited(spoofed)
    assert other.status_code == 201


@override_settings(RATE_LIMIT_BURST=2, RATE_LIMIT_PER_SECOND=SLOW)
def test_joining_the_queue_is_limited_and_looking_is_not() -> None:
    drop = make_drop(slug="line", waiting_room=True)
    admission.run_wave(drop)
    auth = bearer("ann")

    joins = [Client().post("/api/drops/line/queue", **auth) for _ in range(3)]
    looks = [Client().get("/api/drops/line/queue", **auth) for _ in range(3)]

    assert [j.status_code for j in joins[:2]] == [200, 200]
    assert joins[0].json()["ticket"] == joins[1].json()["ticket"]
    assert_limited(joins[2])
    assert [look.status_code for look in looks] == [200] * 3
    assert Ticket.objects.filter(drop=drop).count() == 1


@pytest.mark.servers
def test_with_redis_gone_the_answer_is_wait_and_nothing_is_sold(tmp_path: Path) -> None:
    drop = make_drop(slug="dark", quantity=10, waiting_room=False)
    room = make_drop(slug="room", waiting_room=True)
    admission.run_wave(room)
    before, after = bearer("before"), bearer("after")
    url, stop, _running = start_redis(tmp_path)  # a real Redis of the test's own, stopped halfway
    caches = {"default": {**settings.CACHES["default"], "LOCATION": url}}

    try:
        with override_settings(CACHES=caches):
            served = post_hold("dark", before, 1, key="k")
            stop()
            reserve = post_hold("dark", after, 1, key="k")
            join = Client().post("/api/drops/room/queue", **after)
            page = Client()
            page.force_login(ApiToken.objects.get(user__username="after").user)
            bought = page.post("/drops/dark/buy", {"quantity": "1", "idempotency_key": "p"})
    finally:
        stop()

    assert served.status_code == 201
    for answer in (reserve, join):
        assert answer.status_code == 503, answer.content
        assert answer.json()["error"] == "busy" and answer["Retry-After"] == "1"
    assert bought.status_code == 302 and bought["Location"] == "/drops/dark/"
    assert list(Hold.objects.values_list("buyer__username", flat=True)) == ["before"]
    assert not Ticket.objects.filter(drop=room).exists()
    assert invariant(drop_id=drop.pk).held == 1
