"""The draw's public record is computed once it is drawn, kept, and answered 304 to a client that has it
(issue 43: uncached, 260 KB at 20,000 entries, one client at 21 requests/s slowed the drop page)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client, TestCase
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.http import http_date

from admission import services
from admission.models import Queue
from tests.admission.test_fair_draw import drawn_drop
from tests.factories import make_drop

pytestmark = pytest.mark.django_db


def test_a_drawn_record_is_computed_once_and_answered_from_the_cache(make_buyers) -> None:
    drop = drawn_drop(make_buyers, slug="record", n=40)
    url = "/api/drops/record/queue/draw"
    first = Client().get(url)

    with CaptureQueriesContext(connection) as second_queries:
        second = Client().get(url)

    assert first.status_code == second.status_code == 200
    assert second.content == first.content
    assert second.json() == services.draw_entries(drop=drop) and len(second.json()["order"]) == 40
    # the drop and the queue's drawn_at, each one indexed read: the entries are not read again
    assert len(second_queries) == 2, [q["sql"] for q in second_queries.captured_queries]
    assert not any("admission_ticket" in q["sql"] for q in second_queries.captured_queries)
    drawn_at = Queue.objects.get(pk=drop.pk).drawn_at
    assert drawn_at is not None
    assert second["ETag"] == first["ETag"] and second["ETag"].startswith('"draw-')
    assert second["Last-Modified"] == http_date(drawn_at.timestamp())
    assert second["Cache-Control"] == "public, max-age=86400, immutable"


def test_a_client_that_has_the_record_gets_304_without_the_document(make_buyers) -> None:
    drawn_drop(make_buyers, slug="record-304", n=40)
    url = "/api/drops/record-304/queue/draw"
    first = Client().get(url)

    with CaptureQueriesContext(connection) as queries:
        by_etag = Client().get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert len(queries) == 2  # the drop and when it was drawn: not even the cache is read
    by_date = Client().get(url, HTTP_IF_MODIFIED_SINCE=first["Last-Modified"])
    among_others = Client().get(url, HTTP_IF_NONE_MATCH=f'"draw-0-0", {first["ETag"]}')

    for unchanged in (by_etag, by_date, among_others):
        assert unchanged.status_code == 304 and unchanged.content == b""
        assert unchanged["ETag"] == first["ETag"]
        assert unchanged["Cache-Control"] == "public, max-age=86400, immutable"


@pytest.mark.parametrize(
    "header",
    [
        {"HTTP_IF_NONE_MATCH": '"draw-0-0"'},  # another version
        {"HTTP_IF_NONE_MATCH": "garbage"},
        {"HTTP_IF_NONE_MATCH": '"' + "x" * 5000 + '"'},
        {"HTTP_IF_MODIFIED_SINCE": "not a date"},
        {"HTTP_IF_MODIFIED_SINCE": "Mon, 01 Jan 1990 00:00:00 GMT"},  # before the draw
    ],
)
def test_a_stale_or_garbage_validator_gets_the_whole_record(make_buyers, header: dict[str, Any]) -> None:
    drawn_drop(make_buyers, slug="record-garbage", n=3)
    url = "/api/drops/record-garbage/queue/draw"
    whole = Client().get(url)

    answer = Client().get(url, **header)

    assert answer.status_code == 200 and answer.content == whole.content


def test_control_before_the_draw_nothing_is_kept_and_the_draw_is_seen_at_once(make_buyers) -> None:
    """Before the draw the record still changes: no validators, no-cache, computed each time."""
    url = "/api/drops/record-later/queue/draw"
    drop = make_drop(
        slug="record-later", quantity=5, waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5)
    )
    for buyer in make_buyers(3, prefix="later-"):
        services.join(drop=drop, buyer_id=buyer)
    before = Client().get(url)
    with TestCase.captureOnCommitCallbacks(execute=True):
        services.run_wave(drop, now=drop.starts_at + timedelta(seconds=1))
    after = Client().get(url)

    assert before.status_code == 200 and before.json()["drawn"] is False
    assert "ETag" not in before and before["Cache-Control"] == "no-cache"
    assert after.json()["drawn"] is True and len(after.json()["order"]) == 3
    assert after["ETag"].startswith('"draw-')


def test_a_drop_without_a_waiting_room_still_answers_409_and_no_record() -> None:
    make_drop(slug="record-plain", quantity=5)
    answer = Client().get("/api/drops/record-plain/queue/draw", HTTP_IF_NONE_MATCH="*")
    assert answer.status_code == 409 and answer.json()["error"] == "no_waiting_room"
    assert "ETag" not in answer
