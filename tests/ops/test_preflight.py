"""The hour before a waiting room's start: the shop asks the drand relays for a round and verifies it,
as the draw will; if none answers with a valid one, on-call is paged (the metric and its alert rule,
tests/test_alerts.py) and the merchant is e-mailed, once per drop.

`now` is set just after the recorded quicknet round (tests/beacons.py), so "the latest round" the
check asks for is the one the local relay serves.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.test import TestCase

from admission import beacon
from admission.models import Queue
from checkout import outbox
from checkout.models import OutboxMessage
from core import metrics
from ops import metrics as ops_metrics
from ops import preflight
from tests import beacons
from tests.factories import make_drop

pytestmark = pytest.mark.django_db

NOW = beacon.QUICKNET.time_of(beacons.QUICKNET_ROUND) + timedelta(seconds=1)


def room(slug: str, *, starts_in: timedelta = timedelta(minutes=40)) -> int:
    drop = make_drop(
        slug=slug, waiting_room=True, starts_at=NOW + starts_in, ends_at=NOW + timedelta(hours=3)
    )
    return drop.pk


def check() -> int:
    with TestCase.captureOnCommitCallbacks(execute=True):
        return preflight.check_draw_beacons(now=NOW)


def scraped(slug: str) -> str:
    text = metrics.render_prometheus(
        drop_slugs=ops_metrics.drop_slugs, extra=ops_metrics.draw_beacon_gauges(now=NOW)
    )
    return next(
        (
            line
            for line in text.splitlines()
            if line.startswith(f'floodgate_draw_beacon_unreachable{{drop="{slug}"')
        ),
        "",
    )


def test_a_relay_that_answers_with_a_valid_round_passes(drand_relay) -> None:
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.QUICKNET_SIGNATURE)
    drop = room("reachable")
    later = room("later", starts_in=timedelta(hours=2))  # not yet its hour: not checked

    assert check() == 0

    queue = Queue.objects.get(pk=drop)
    assert queue.preflight_ok is True and queue.preflight_at == NOW
    assert Queue.objects.filter(pk=later, preflight_at__isnull=False).count() == 0
    assert drand_relay.asked == [f"/{beacon.QUICKNET.hash}/public/{beacons.QUICKNET_ROUND}"]
    assert scraped("reachable").endswith(" 0.0")
    assert not OutboxMessage.objects.filter(topic=outbox.DRAW_BEACON_TOPIC).exists()


@pytest.mark.parametrize("relay", ["none answers", "a forged signature"])
def test_no_valid_round_pages_on_call_and_tells_the_merchant_once(drand_relay, settings, relay: str) -> None:
    settings.MERCHANT_EMAIL = ["merchant@shop.example"]
    if relay == "none answers":
        settings.DRAW_BEACON_URLS = ["http://127.0.0.1:9"]
    else:
        drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.forged(beacons.QUICKNET_SIGNATURE))
    drop = room("blocked")

    assert check() == 1
    assert check() == 1  # the next minute: still failing, still on the metric, no second e-mail

    queue = Queue.objects.get(pk=drop)
    assert queue.preflight_ok is False and queue.preflight_note
    assert scraped("blocked").endswith(" 1.0")
    assert OutboxMessage.objects.filter(topic=outbox.DRAW_BEACON_TOPIC).count() == 1
    mail.outbox.clear()
    outbox.relay_outbox()
    (sent,) = mail.outbox
    assert sent.to == ["merchant@shop.example"]
    assert "cannot reach its public random round" in sent.subject
    body = sent.body  # the plain part (locmem keeps the message object)
    assert "drawn on the shop's own seed alone" in body and queue.preflight_note[:40] in body


def test_control_the_relay_back_clears_the_metric(drand_relay, settings) -> None:
    working = settings.DRAW_BEACON_URLS
    settings.DRAW_BEACON_URLS = ["http://127.0.0.1:9"]
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.QUICKNET_SIGNATURE)
    room("flaky")
    check()
    assert scraped("flaky").endswith(" 1.0")
    settings.DRAW_BEACON_URLS = working
    check()
    assert scraped("flaky").endswith(" 0.0")
