"""schemathesis over the published OpenAPI document, against a real server.

Every operation of /api/openapi.json gets generated requests (valid ones and, in schemathesis'
negative mode, ones that break the schema) through a real daphne serving config.asgi (so the
edge and the claim lane answer what they answer in production). Each answer must not be a
5xx and must conform to the document: its status listed, its body the listed schema. Half the
requests name a real drop, hold and order of a real buyer, so they get past "not found".
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis as redis_lib
import schemathesis
from django.conf import settings as django_settings
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis import checks

from checkout.models import Order
from config import api
from holds import services as holds
from shop.models import ApiToken
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = schemathesis.openapi.from_dict(api.schema())
TOKEN = "fuzz-token-of-a-real-buyer"
EXAMPLES = 25  # per operation and mode: ~700 requests, about a minute
# The answer's side: no 5xx, a listed status, the listed content type, headers and body; and a
# request the document forbids is refused. Not "a schema-valid request is accepted": the
# document cannot say a drop's per-buyer limit or its stock, which are the business's 4xx.
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
]


@pytest.fixture
def shop(live_daphne: str) -> Iterator[dict[str, str]]:
    """A live drop with stock, a buyer with a token, a hold and an order of theirs."""
    buyer = make_buyer("fuzzer")
    ApiToken.objects.create(user=buyer, digest=ApiToken.digest_of(TOKEN))
    drop = make_drop(slug="fuzz", quantity=1_000, per_buyer_limit=3)
    make_drop(slug="fuzz-room", quantity=10, waiting_room=True)
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="fuzz-hold").hold
    order = Order.objects.create(
        hold=hold, buyer=buyer, drop=drop, quantity=1, amount_minor=100, currency="EUR"
    )
    yield {
        "base": live_daphne,
        "slug": "fuzz",
        "room": "fuzz-room",
        "hold": str(hold.pk),
        "order": str(order.pk),
    }


@SCHEMA.parametrize()
@SCHEMA.given(real=st.booleans(), room=st.booleans())
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same requests every run: a failure here is reproducible
)
def test_no_answer_is_a_5xx_and_every_answer_is_in_the_schema(
    case: schemathesis.Case, real: bool, room: bool, shop: dict[str, str]
) -> None:
    negative = case.meta is not None and case.meta.generation.mode.is_negative
    if real and not negative:  # a negative case keeps what makes it invalid
        params = case.path_parameters or {}
        if "slug" in params:
            params["slug"] = shop["room" if room else "slug"]
        if "id" in params:
            params["id"] = shop["order" if "/orders/" in case.path else "hold"]
    headers = {"Authorization": f"Bearer {TOKEN}"} if (real or room) and not negative else {}
    limits = redis_lib.Redis.from_url(django_settings.REDIS_URL)
    stale = list(limits.scan_iter("fg:rl:*"))
    if stale:  # hundreds of requests of one buyer: the rate limit would answer them all
        limits.delete(*stale)

    response = case.call(base_url=shop["base"], headers=headers, timeout=30)

    assert response.status_code < 500, (
        case.method,
        case.formatted_path,
        response.status_code,
        response.text[:300],
    )
    case.validate_response(response, checks=CHECKS)
