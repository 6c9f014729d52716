from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import redis as redis_lib
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.urls import path
from django.utils import timezone
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from config import urls as shop_urls
from core import metrics
from ops import metrics as ops_metrics
from ops.views import metrics as metrics_view
from tests.factories import drop_permission, make_drop

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

pytestmark = pytest.mark.django_db

# /metrics on its own: these tests call the view without the rest of the site.
urlpatterns = [*shop_urls.urlpatterns, path("metrics", metrics_view)]

LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(
    rf"(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{{(?P<labels>{LABEL}(?:,{LABEL})*)?\}})? (?P<value>\S+)"
)


@pytest.fixture(autouse=True)
def clean_metrics(redis: redis_lib.Redis) -> Iterator[None]:
    def flush() -> None:
        keys = list(redis.scan_iter(match="fg:m:*", count=1000))
        if keys:
            redis.delete(*keys)

    flush()
    metrics._health.skip_until = 0.0
    metrics._health.warned_at = -math.inf
    yield
    flush()
    metrics._health.skip_until = 0.0
    metrics._health.warned_at = -math.inf


def parse(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample line of the exposition; fails on a line that is not `name{labels} value`."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.fullmatch(line)
        assert match, f"not a sample line: {line!r}"
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', match["labels"] or ""))
        samples[(match["name"], labels)] = float(match["value"])
    return samples


def sample(samples: dict, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def scrape(client: Client, **headers: str) -> TestResponse:
    with override_settings(ROOT_URLCONF=__name__):
        return client.get("/metrics", headers=headers)


def test_totals_count_each_drop_and_outcome(redis: redis_lib.Redis, django_assert_num_queries) -> None:
    drop = make_drop(slug="totals")

    with django_assert_num_queries(0):
        for _ in range(3):
            metrics.observe_reserve(drop_id=drop.pk, outcome="held", seconds=0.004)
        metrics.observe_reserve(drop_id=drop.pk, outcome="sold_out", seconds=0.002)
        metrics.observe_reserve(drop_id=drop.pk, outcome="Not A Code!", seconds=0.002)

    assert redis.hgetall(f"fg:m:reserve:total:{drop.pk}") == {
        b"held": b"3",
        b"sold_out": b"1",
        b"other": b"1",
    }


def test_per_second_keys_expire(redis: redis_lib.Redis) -> None:
    metrics.observe_reserve(drop_id=7, outcome="held", seconds=0.001)

    second_keys = list(redis.scan_iter(match="fg:m:reserve:second:7:*"))
    assert len(second_keys) == 1
    assert 0 < redis.ttl(second_keys[0]) <= metrics.SECOND_TTL


def test_rates_average_the_last_whole_seconds() -> None:
    now = time.time()
    # given 20 claims and 10 rejections in the last 10 whole seconds, 5 more in the current one
    for _ in range(20):
        metrics.observe_reserve(drop_id=1, outcome="held", seconds=0.01, now=now - 3)
    for _ in range(10):
        metrics.observe_reserve(drop_id=1, outcome="sold_out", seconds=0.01, now=now - 9)
    for _ in range(5):
        metrics.observe_reserve(drop_id=1, outcome="held", seconds=0.01, now=now)
    metrics.observe_reserve(drop_id=1, outcome="paused", seconds=0.01, now=now - 11)
    metrics.observe_reserve(drop_id=2, outcome="held", seconds=0.01, now=now - 1)

    assert metrics.rates(drop_id=1, now=now) == {"claims_per_second": 2.0, "rejections_per_second": 1.0}
    assert metrics.rates(drop_id=1, window_seconds=20, now=now) == {
        "claims_per_second": 1.0,
        "rejections_per_second": 0.55,
    }
    assert metrics.rates(drop_id=3, now=now) == {"claims_per_second": 0.0, "rejections_per_second": 0.0}


def test_series_has_one_point_per_ten_seconds_oldest_first() -> None:
    now = time.time()
    step = int(now) // 10 * 10
    metrics.observe_reserve(drop_id=1, outcome="held", seconds=0.01, now=step - 1)  # last whole step
    metrics.observe_reserve(drop_id=1, outcome="held", seconds=0.01, now=step - 10)  # same step
    metrics.observe_reserve(drop_id=1, outcome="ended", seconds=0.01, now=step - 55)
    metrics.observe_reserve(drop_id=1, outcome="held", seconds=0.01, now=step - 61)  # before the window
    metrics.observe_reserve(drop_id=1, outcome="held", seconds=0.01, now=now)  # step still filling

    points = metrics.series(drop_id=1, minutes=1, now=now)

    assert [p["t"] for p in points] == list(range(step - 60, step, 10))
    assert points[-1] == {"t": step - 10, "claims": 2, "rejections": 0}
    assert points[0] == {"t": step - 60, "claims": 0, "rejections": 1}
    assert sum(p["claims"] + p["rejections"] for p in points) == 3
    assert len(metrics.series(drop_id=1, now=now)) == 60
    assert len(metrics.series(drop_id=1, minutes=999, now=now)) == metrics.MAX_SERIES_MINUTES * 6


def ms(quantiles: dict[str, float | None], name: str) -> float:
    """One quantile of a drop that has latencies recorded."""
    value = quantiles[name]
    assert value is not None, f"no {name}"
    return value


def test_quantiles_interpolate_within_the_bucket() -> None:
    for _ in range(100):
        metrics.observe_reserve(drop_id=1, outcome="held", seconds=0.003)
    for _ in range(90):
        metrics.observe_reserve(drop_id=2, outcome="held", seconds=0.0005)
    for _ in range(10):
        metrics.observe_reserve(drop_id=2, outcome="busy", seconds=0.3)
    metrics.observe_reserve(drop_id=3, outcome="error", seconds=60)

    same = metrics.latency_quantiles(drop_id=1)
    mixed = metrics.latency_quantiles(drop_id=2)

    assert 2.5 < ms(same, "p50_ms") < 5
    assert 2.5 < ms(same, "p99_ms") <= 5
    assert ms(mixed, "p50_ms") <= 1
    assert 250 < ms(mixed, "p99_ms") <= 500
    assert metrics.latency_quantiles(drop_id=3) == {"p50_ms": 2500.0, "p99_ms": 2500.0}
    assert metrics.latency_quantiles(drop_id=4) == {"p50_ms": None, "p99_ms": None}


def test_metrics_page_has_counters_cumulative_histogram_and_gauges(settings) -> None:
    settings.DEBUG = False
    drop = make_drop(slug="big-sale", quantity=10)
    staff = get_user_model().objects.create_user(username="ops", password="x", is_staff=True)
    staff.user_permissions.add(drop_permission("view_drop"))
    for seconds in (0.0005, 0.003, 0.003, 0.2, 9.0):
        metrics.observe_reserve(drop_id=drop.pk, outcome="held", seconds=seconds)
    metrics.observe_reserve(drop_id=drop.pk, outcome="sold_out", seconds=0.001)
    metrics.record_drift(drop_id=drop.pk)
    metrics.record_drift(drop_id=drop.pk)
    client = Client()
    client.force_login(staff)

    answer = scrape(client)

    assert answer.status_code == 200
    assert answer["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    text = answer.content.decode()
    assert "# TYPE floodgate_reserve_requests_total counter" in text
    assert "# TYPE floodgate_drift_detected_total counter" in text
    assert "# TYPE floodgate_reserve_latency_seconds histogram" in text
    samples = parse(text)
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    for name, _labels in samples:
        family = name if name in types else name.rsplit("_", 1)[0]
        assert types[family] == "histogram" if family != name else name in types, name
    assert sample(samples, "floodgate_reserve_requests_total", drop="big-sale", outcome="held") == 5
    assert sample(samples, "floodgate_reserve_requests_total", drop="big-sale", outcome="sold_out") == 1
    held, no = (
        [
            sample(samples, "floodgate_reserve_latency_seconds_bucket", drop="big-sale", answer=answer, le=le)
            for le in metrics.LE
        ]
        for answer in ("held", "no")
    )
    assert held == sorted(held) and no == sorted(no)
    assert (held[0], no[0]) == (1, 1)  # 0.5 ms held, 1 ms refused: le is inclusive
    count = "floodgate_reserve_latency_seconds_count"
    assert held[-1] == sample(samples, count, drop="big-sale", answer="held") == 5
    assert no[-1] == sample(samples, count, drop="big-sale", answer="no") == 1
    assert sample(
        samples, "floodgate_reserve_latency_seconds_sum", drop="big-sale", answer="held"
    ) == pytest.approx(9.2065, abs=1e-6)
    assert sample(samples, "floodgate_drift_detected_total", drop="big-sale") == 2
    assert sample(samples, "floodgate_holds", drop="big-sale", state="held") == 0
    assert sample(samples, "floodgate_expired_unsold_holds", drop="big-sale") == 0
    assert sample(samples, "floodgate_invariant_drift", drop="big-sale") == 0
    assert sample(samples, "floodgate_stranded_units", drop="big-sale") == 0
    assert sample(samples, "floodgate_lock_waits") == 0
    assert (
        sample(samples, "floodgate_outbox_backlog"),
        sample(samples, "floodgate_outbox_oldest_seconds"),
    ) == (0, 0)
    assert sample(samples, "floodgate_snapshot_age_seconds", drop="big-sale") == float(
        "inf"
    )  # never published
    assert sample(samples, "floodgate_metrics_store_up") == 1


def test_gauges_leave_out_drops_ended_over_an_hour_ago() -> None:
    long_ago = timezone.now() - ops_metrics.RECENT * 5
    make_drop(slug="old", starts_at=long_ago, ends_at=long_ago + ops_metrics.RECENT)
    make_drop(slug="now")

    families = {gauge.name: gauge for gauge in ops_metrics.drop_gauges()}

    assert {labels["drop"] for labels, _ in families["floodgate_invariant_drift"].samples} == {"now"}


def test_label_values_are_escaped() -> None:
    gauge = metrics.Gauge("floodgate_test", "a \\ help\nline", [({"drop": 'a"b\\c\nd'}, 1.5)])

    text = metrics.render_prometheus(drop_slugs=ops_metrics.drop_slugs, extra=[gauge])

    assert 'floodgate_test{drop="a\\"b\\\\c\\nd"} 1.5' in text.splitlines()
    assert "# HELP floodgate_test a \\\\ help\\nline" in text.splitlines()
    parse(text)


@pytest.mark.parametrize(
    ("debug", "staff", "token", "header", "status"),
    [
        (False, False, "", "", 403),
        (False, False, "", "Bearer ", 403),
        (True, False, "", "", 200),
        (False, True, "", "", 200),
        (False, False, "s3cret-token", "Bearer s3cret-token", 200),
        (False, False, "s3cret-token", "bearer s3cret-token", 200),
        (False, False, "s3cret-token", "Bearer wrong", 403),
        (False, False, "s3cret-token", "Bearer s3cret-tokén", 403),
        (False, False, "s3cret-token", "", 403),
    ],
)
def test_access(settings, debug: bool, staff: bool, token: str, header: str, status: int) -> None:
    settings.DEBUG = debug
    settings.METRICS_TOKEN = token
    client = Client()
    if staff:
        user = get_user_model().objects.create_user(username="s", password="x", is_staff=True)
        user.user_permissions.add(drop_permission("view_drop"))
        client.force_login(user)

    answer = scrape(client, **({"Authorization": header} if header else {}))

    assert answer.status_code == status


def test_non_staff_user_is_refused(settings) -> None:
    settings.DEBUG = False
    client = Client()
    client.force_login(get_user_model().objects.create_user(username="buyer", password="x"))

    assert scrape(client).status_code == 403


def test_redis_down_never_raises_and_warns_once(monkeypatch, caplog) -> None:
    # a real client that fails for real: nothing listens on port 1
    dead = redis_lib.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    working = metrics._client
    monkeypatch.setattr(metrics, "_client", lambda: dead)
    monkeypatch.setattr(metrics, "BACKOFF_SECONDS", 0.0)

    with caplog.at_level(logging.WARNING, logger="core.metrics"):
        for _ in range(3):
            metrics.observe_reserve(drop_id=1, outcome="held", seconds=0.01)  # no exception
        metrics.record_drift(drop_id=1)
        text = metrics.render_prometheus(drop_slugs=ops_metrics.drop_slugs)

    assert len([r for r in caplog.records if r.name == "core.metrics"]) == 1
    assert sample(parse(text), "floodgate_metrics_store_up") == 0
    with pytest.raises(redis_lib.RedisError):
        metrics.rates(drop_id=1)
    monkeypatch.setattr(metrics, "_client", working)
    metrics.observe_reserve(drop_id=1, outcome="held", seconds=0.01)
    assert working().hgetall("fg:m:reserve:total:1") == {b"held": b"1"}


def test_after_a_failure_writes_pause_briefly(monkeypatch) -> None:
    dead = redis_lib.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=0.2)
    working = metrics._client
    monkeypatch.setattr(metrics, "_client", lambda: dead)
    metrics.observe_reserve(drop_id=1, outcome="held", seconds=0.01)
    monkeypatch.setattr(metrics, "_client", working)

    started = time.monotonic()
    metrics.observe_reserve(drop_id=1, outcome="held", seconds=0.01)

    assert time.monotonic() - started < 0.05
    assert working().hgetall("fg:m:reserve:total:1") == {}


def test_exposition_parses_as_prometheus_text_without_created_series() -> None:
    drop = make_drop(slug="parsed")
    metrics.observe_reserve(drop_id=drop.pk, outcome="held", seconds=0.003)
    metrics.record_drift(drop_id=drop.pk)

    text = metrics.render_prometheus(drop_slugs=ops_metrics.drop_slugs, extra=ops_metrics.drop_gauges())

    families = {family.name: family for family in text_string_to_metric_families(text)}
    assert families["floodgate_reserve_requests"].type == "counter"
    assert families["floodgate_reserve_latency_seconds"].type == "histogram"
    assert families["floodgate_holds"].type == "gauge"
    names = {s.name for family in families.values() for s in family.samples}
    assert "floodgate_drift_detected_total" in names
    # Our counters come from Redis, not from this process: a _created time would be made up.
    assert not [name for name in names if name.endswith("_created")]
    # A private registry per scrape: nothing of ours lands in the process-wide one.
    assert b"floodgate_" not in generate_latest(REGISTRY)


def test_a_gauge_needs_one_set_of_label_names() -> None:
    with pytest.raises(ValueError, match="same label names"):
        metrics.Gauge("floodgate_test", "mixed", [({"drop": "a"}, 1), ({"state": "b"}, 2)])
    with pytest.raises(ValueError, match="label names"):
        metrics.Gauge("floodgate_test", "reserved", [({"__name__": "a"}, 1)])


@pytest.mark.django_db(transaction=True)
def test_what_on_call_is_alerted_on_moves_in_the_scrape() -> None:
    """Lock waits, the outbox backlog, stranded units and a snapshot's age, each made real."""
    from datetime import timedelta
    from threading import Thread

    from admission import state
    from checkout.models import OutboxMessage
    from inventory.models import StockBucket
    from tests.harness import lock_stock

    drop = make_drop(slug="on-call", quantity=10, buckets=4, per_buyer_limit=4)
    StockBucket.objects.filter(drop=drop).update(available=2)  # 8 left, no bucket holds 4
    OutboxMessage.objects.create(topic="email", key="k", payload={})
    OutboxMessage.objects.filter(key="k").update(created_at=timezone.now() - timedelta(minutes=5))
    state.refresh([drop.pk])
    blocker = lock_stock(drop.pk)
    waiter = Thread(target=_wait_for_stock, args=(drop.pk,))
    waiter.start()
    try:
        deadline = time.monotonic() + 10
        while ops_metrics.lock_waits() == 0:
            assert time.monotonic() < deadline, "the second session never waited"
            time.sleep(0.05)
        with override_settings(DEBUG=True):
            samples = parse(scrape(Client()).content.decode())
    finally:
        blocker.rollback()
        blocker.close()
        waiter.join()

    assert sample(samples, "floodgate_lock_waits") >= 1
    assert sample(samples, "floodgate_outbox_backlog") == 1
    assert 299 < sample(samples, "floodgate_outbox_oldest_seconds") < 400
    assert sample(samples, "floodgate_stranded_units", drop="on-call") == 8
    assert 0 <= sample(samples, "floodgate_snapshot_age_seconds", drop="on-call") < 60


def _wait_for_stock(drop_id: int) -> None:
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM inventory_stockbucket WHERE drop_id = %s FOR UPDATE", [drop_id])
    connection.close()
