"""Reserve metrics shared by every web and worker process, kept in Redis under "fg:m:".

Writes are one pipelined round trip, no database query, and never raise: a sale must not
fail because Redis did. Reads (rates, series, quantiles, the Prometheus text) serve
dashboards and scrapes; rates, series and latency_quantiles raise RedisError when Redis is
down, render_prometheus reports it as floodgate_metrics_store_up 0 instead. The exposition
text is prometheus_client's, from collectors over this store.

Keys (bounded: per-second data expires, the rest is one small hash per drop):
    fg:m:drops                         set of drop ids that have reserve metrics
    fg:m:drift                         hash drop id -> times drift was detected
    fg:m:gate:refused                  hash drop id -> reserves the Redis gate answered "sold out"
                                       (written by holds.gate's Lua, in the refusal's own call)
    fg:m:reserve:total:<drop>          hash outcome -> reserve answers
    fg:m:reserve:latency:<drop>        hash "c:<le>" / "r:<le>" -> claims / refusals in that bucket
                                       (not cumulative), "c:sum_us" / "r:sum_us"
    fg:m:reserve:second:<drop>:<min>   hash "c:<unix second>" / "r:<unix second>" -> claims /
                                       rejections; one hash per minute, expires after 15 minutes
"""

from __future__ import annotations

import logging
import math
import re
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import cast

from django_redis import get_redis_connection
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from redis import Redis
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

PREFIX = "fg:m:"
DROPS_KEY = PREFIX + "drops"
DRIFT_KEY = PREFIX + "drift"
GATE_REFUSALS_KEY = PREFIX + "gate:refused"
SECOND_TTL = 15 * 60
SERIES_STEP = 10
MAX_SERIES_MINUTES = SECOND_TTL // 60 - 1  # a minute's hash may expire 15 minutes after its last write
BUCKETS_MS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)
LE = (*(repr(ms / 1000) for ms in BUCKETS_MS), "+Inf")
CLAIMED = "held"
OUTCOME_RULE = re.compile(r"[a-z][a-z0-9_]{0,39}")  # anything else is "other": labels stay bounded
BACKOFF_SECONDS = 5.0
WARN_EVERY_SECONDS = 60.0
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


class _Health:
    """The last Redis failure in this process: writes pause briefly, warnings come once a minute."""

    skip_until = 0.0
    warned_at = -math.inf


_health = _Health()


def _client() -> Redis:
    return cast(Redis, get_redis_connection("default"))  # django-redis is untyped


def _totals_key(drop_id: int) -> str:
    return f"{PREFIX}reserve:total:{drop_id}"


def _latency_key(drop_id: int) -> str:
    return f"{PREFIX}reserve:latency:{drop_id}"


def _seconds_key(drop_id: int, minute: int) -> str:
    return f"{PREFIX}reserve:second:{drop_id}:{minute}"


def _warn(error: Exception) -> None:
    now = time.monotonic()
    if now - _health.warned_at >= WARN_EVERY_SECONDS:
        _health.warned_at = now
        log.warning("metrics store unavailable, metrics are being dropped: %s", error)


def _failed(error: Exception) -> None:
    # A hung Redis costs a socket timeout per call; skipping for a few seconds keeps
    # that off every reserve request.
    _health.skip_until = time.monotonic() + BACKOFF_SECONDS
    _warn(error)


def observe_reserve(*, drop_id: int, outcome: str, seconds: float, now: float | None = None) -> None:
    """Count one reserve answer and its latency: one pipelined round trip, never raises."""
    observe_reserves(drop_id=drop_id, answers=[(outcome, seconds)], now=now)


def observe_reserves(*, drop_id: int, answers: Sequence[tuple[str, float]], now: float | None = None) -> None:
    """Count reserve answers (outcome, seconds) of one drop in one pipelined round trip; never raises."""
    if not answers or time.monotonic() < _health.skip_until:
        return
    second = int(time.time() if now is None else now)
    minute_key = _seconds_key(drop_id, second // 60)
    latency_key = _latency_key(drop_id)
    try:
        pipe = _client().pipeline(transaction=False)
        pipe.sadd(DROPS_KEY, drop_id)
        for outcome, seconds in answers:
            outcome = outcome if OUTCOME_RULE.fullmatch(outcome) else "other"
            kind = "c" if outcome == CLAIMED else "r"
            ms = 0.0 if math.isnan(seconds) else min(max(seconds, 0.0), 3600.0) * 1000
            pipe.hincrby(_totals_key(drop_id), outcome, 1)
            pipe.hincrby(minute_key, f"{kind}:{second}", 1)
            pipe.hincrby(latency_key, f"{kind}:{LE[bisect_left(BUCKETS_MS, ms)]}", 1)
            pipe.hincrby(latency_key, f"{kind}:sum_us", round(ms * 1000))
        pipe.expire(minute_key, SECOND_TTL)
        pipe.execute()
    except (RedisError, OSError) as error:
        _failed(error)


def record_drift(*, drop_id: int) -> None:
    """Count one detection of stock drift in the drop; never raises."""
    if time.monotonic() < _health.skip_until:
        return
    try:
        _client().hincrby(DRIFT_KEY, str(drop_id), 1)
    except (RedisError, OSError) as error:
        _failed(error)


def _per_second(drop_id: int, start: int, end: int) -> tuple[dict[int, int], dict[int, int]]:
    """Claims and rejections per unix second in [start, end), from one pipelined round trip."""
    pipe = _client().pipeline(transaction=False)
    for minute in range(start // 60, (end - 1) // 60 + 1):
        pipe.hgetall(_seconds_key(drop_id, minute))
    claims: dict[int, int] = {}
    rejections: dict[int, int] = {}
    for reply in pipe.execute():
        for raw_field, raw_count in reply.items():
            kind, _, raw_second = raw_field.decode().partition(":")
            second = int(raw_second)
            if start <= second < end:
                (claims if kind == "c" else rejections)[second] = int(raw_count)
    return claims, rejections


def rates(*, drop_id: int, window_seconds: int = 10, now: float | None = None) -> dict[str, float]:
    """Claims and rejections per second, averaged over the last `window_seconds` whole seconds."""
    window = max(1, min(window_seconds, SECOND_TTL - 60))
    end = int(time.time() if now is None else now)  # the current second is still filling
    claims, rejections = _per_second(drop_id, end - window, end)
    return {
        "claims_per_second": sum(claims.values()) / window,
        "rejections_per_second": sum(rejections.values()) / window,
    }


def series(*, drop_id: int, minutes: int = 10, now: float | None = None) -> list[dict[str, int]]:
    """One point per 10-second step of the last `minutes` (at most 14), oldest first.

    Each point is {"t": step start in unix seconds, "claims": n, "rejections": n}, counts over
    the step; the step still filling is left out so the chart's right edge does not dip.
    """
    span = max(1, min(minutes, MAX_SERIES_MINUTES)) * 60
    end = int(time.time() if now is None else now) // SERIES_STEP * SERIES_STEP
    claims, rejections = _per_second(drop_id, end - span, end)
    return [
        {
            "t": t,
            "claims": sum(claims.get(s, 0) for s in range(t, t + SERIES_STEP)),
            "rejections": sum(rejections.get(s, 0) for s in range(t, t + SERIES_STEP)),
        }
        for t in range(end - span, end, SERIES_STEP)
    ]


ANSWERS = {"c": CLAIMED, "r": "no"}  # the histogram's "answer" label: a hold, or any refusal


def _bucket_counts(reply: Mapping[bytes, bytes], kinds: str = "cr") -> list[int]:
    return [sum(int(reply.get(f"{kind}:{le}".encode(), 0)) for kind in kinds) for le in LE]


def _quantile(q: float, counts: Sequence[int]) -> float | None:
    """Like Prometheus' histogram_quantile: linear within the bucket, the +Inf bucket reads as
    the highest finite bound."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for index, n in enumerate(counts):
        if n and seen + n >= rank:
            if index == len(BUCKETS_MS):
                return float(BUCKETS_MS[-1])
            lower = BUCKETS_MS[index - 1] if index else 0.0
            return lower + (BUCKETS_MS[index] - lower) * (rank - seen) / n
        seen += n
    return float(BUCKETS_MS[-1])


def latency_quantiles(*, drop_id: int) -> dict[str, float | None]:
    """Median and 99th percentile reserve latency in ms since metrics began; None without data."""
    counts = _bucket_counts(cast(dict[bytes, bytes], _client().hgetall(_latency_key(drop_id))))
    return {"p50_ms": _quantile(0.5, counts), "p99_ms": _quantile(0.99, counts)}


@dataclass(frozen=True)
class Gauge:
    """One gauge family for render_prometheus: its name, help text and (labels, value) samples.

    Every sample carries the same label names: Prometheus reads a family as one set of series.
    """

    name: str
    help: str
    samples: Sequence[tuple[Mapping[str, str], float]] = ()

    def __post_init__(self) -> None:
        if not METRIC_NAME.fullmatch(self.name):
            raise ValueError(f"{self.name!r} is not a Prometheus metric name.")
        names = {tuple(labels) for labels, _value in self.samples}
        if len(names) > 1:
            raise ValueError(f"{self.name}: every sample needs the same label names, not {sorted(names)}.")
        bad = [n for n in next(iter(names), ()) if not LABEL_NAME.fullmatch(n) or n.startswith("__")]
        if bad:
            raise ValueError(f"{bad!r} are not Prometheus label names.")

    def family(self) -> GaugeMetricFamily:
        names = list(self.samples[0][0]) if self.samples else []
        family = GaugeMetricFamily(self.name, self.help, labels=names)
        for labels, value in self.samples:
            family.add_metric([str(labels[n]) for n in names], value)
        return family


def gate_refusals(*, drop_id: int) -> int:
    """Reserves of the drop the Redis gate turned away; raises RedisError when Redis is down."""
    return int(_client().hget(GATE_REFUSALS_KEY, str(drop_id)) or 0)


def _read_store() -> tuple[
    dict[int, dict[bytes, bytes]], dict[int, dict[bytes, bytes]], dict[int, int], dict[int, int]
]:
    """Totals and latency hashes per drop, drift counts and gate refusals, in two round trips."""
    client = _client()
    first = client.pipeline(transaction=False)
    first.smembers(DROPS_KEY)
    first.hgetall(DRIFT_KEY)
    first.hgetall(GATE_REFUSALS_KEY)
    raw_ids, raw_drift, raw_gate = first.execute()
    ids = sorted(int(raw) for raw in raw_ids)
    pipe = client.pipeline(transaction=False)
    for drop_id in ids:
        pipe.hgetall(_totals_key(drop_id))
        pipe.hgetall(_latency_key(drop_id))
    replies = pipe.execute()
    totals = {drop_id: replies[2 * i] for i, drop_id in enumerate(ids)}
    latency = {drop_id: replies[2 * i + 1] for i, drop_id in enumerate(ids)}
    drift = {int(raw_id): int(count) for raw_id, count in raw_drift.items()}
    gate = {int(raw_id): int(count) for raw_id, count in raw_gate.items()}
    return totals, latency, drift, gate


class StoreCollector:
    """The counters and the histogram kept in Redis, read once per collect().

    Drops are labelled by slug (`drop_slugs`, one query); metrics of a deleted drop are left out.
    With Redis down only floodgate_metrics_store_up (0) is yielded, so a scrape still succeeds
    and the outage is visible.
    """

    def __init__(self, *, drop_slugs: Callable[[list[int]], Mapping[int, str]]) -> None:
        self.drop_slugs = drop_slugs

    def collect(self) -> Iterator[Metric]:
        try:
            totals, latency, drift, gate = _read_store()
            store_up = 1
        except (RedisError, OSError) as error:
            _warn(error)
            totals, latency, drift, gate, store_up = {}, {}, {}, {}, 0
        ids = sorted(set(totals) | set(drift) | set(gate))
        slugs = dict(self.drop_slugs(ids)) if ids else {}

        requests = CounterMetricFamily(
            "floodgate_reserve_requests",
            "Reserve answers by drop and outcome (held, sold_out, paused, ...).",
            labels=["drop", "outcome"],
        )
        histogram = HistogramMetricFamily(
            "floodgate_reserve_latency_seconds",
            "Reserve answer latency in the claim's service, by answer: held, or no (any refusal).",
            labels=["drop", "answer"],
        )
        for drop_id in (i for i in sorted(totals) if i in slugs):
            slug = slugs[drop_id]
            for raw_outcome, count in sorted(totals[drop_id].items()):
                requests.add_metric([slug, raw_outcome.decode()], int(count))
            # The store keeps per-bucket counts; Prometheus wants them cumulative. _count is
            # taken from the +Inf bucket by prometheus_client, so the two always agree.
            for kind, answer in ANSWERS.items():
                cumulative = list(accumulate(_bucket_counts(latency[drop_id], kind)))
                histogram.add_metric(
                    [slug, answer],
                    list(zip(LE, cumulative, strict=True)),
                    int(latency[drop_id].get(f"{kind}:sum_us".encode(), 0)) / 1_000_000,
                )
        yield requests
        yield histogram
        yield self._per_drop(
            "floodgate_drift_detected",
            "Times the stock invariant was found broken for the drop.",
            drift,
            slugs,
        )
        yield self._per_drop(
            "floodgate_gate_refusals",
            "Reserves the Redis gate answered 'sold out' without a database query.",
            gate,
            slugs,
        )
        yield GaugeMetricFamily("floodgate_metrics_store_up", "1 if Redis answered this scrape.", store_up)

    @staticmethod
    def _per_drop(
        name: str, help_text: str, counts: Mapping[int, int], slugs: Mapping[int, str]
    ) -> CounterMetricFamily:
        family = CounterMetricFamily(name, help_text, labels=["drop"])
        for drop_id, n in sorted(counts.items()):
            if drop_id in slugs:
                family.add_metric([slugs[drop_id]], n)
        return family


class GaugeCollector:
    """The caller's gauges (read from the database at scrape time), as given."""

    def __init__(self, gauges: Sequence[Gauge]) -> None:
        self.gauges = gauges

    def collect(self) -> Iterator[Metric]:
        for gauge in self.gauges:
            yield gauge.family()


def render_prometheus(
    *, drop_slugs: Callable[[list[int]], Mapping[int, str]], extra: Sequence[Gauge] = ()
) -> str:
    """The counters and histograms from Redis plus the caller's gauges, in text format 0.0.4.

    A private registry per scrape: the global one would carry the process' own collectors
    (and keep ours between scrapes), and the gauges differ per call anyway.
    """
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(drop_slugs=drop_slugs))
    registry.register(GaugeCollector(extra))
    return generate_latest(registry).decode()
