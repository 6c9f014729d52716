"""The estimated wait: a range from the line's measured pace that holds about 80% of real waits at a
known admission rate, said in words that never read "0"."""

from __future__ import annotations

import random
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.translation import override

from admission import services, state
from admission.models import Wave
from core import formatting
from shop.models import ApiToken
from tests.factories import make_buyer, make_drop


@pytest.mark.parametrize(("position", "pace"), [(1, 0.5), (3, 6.0), (30, 10.0), (400, 120.0)])
def test_the_range_holds_eight_waits_in_ten_at_a_known_admission_rate(position: int, pace: float) -> None:
    # given admissions one at a time at random moments, `pace` a minute on average (a Poisson line)
    told = state.wait_range(position, pace)
    assert told is not None  # a numbered position in a moving line
    low, high = told
    rng = random.Random(position)
    per_second = pace / 60
    waits = [sum(rng.expovariate(per_second) for _ in range(position)) for _ in range(4000)]

    # then about 80% of the real waits fall inside the range, about 10% on either side of it
    inside = sum(low <= w <= high for w in waits) / len(waits)
    early = sum(w < low for w in waits) / len(waits)
    assert 0.76 <= inside <= 0.84, (low, high, inside)
    assert 0.07 <= early <= 0.13, (low, high, early)
    assert low <= position / per_second <= high  # the mean wait is inside


def test_no_range_for_a_buyer_who_is_in_or_a_line_that_has_not_moved() -> None:
    assert state.wait_range(0, 10.0) is None
    assert state.wait_range(None, 10.0) is None
    assert state.wait_range(5, 0.0) is None


def test_the_words_never_say_zero() -> None:
    with override("en"):
        assert formatting.wait(1, 20) == "under a minute"
        assert formatting.wait(13, 276) == "up to 5 minutes"
        assert formatting.wait(139, 223) == "between 2 and 4 minutes"
        assert formatting.wait(150, 170) == "between 2 and 3 minutes"
        assert formatting.wait(2 * 3600, 3 * 3600 + 1) == "between 2 and 4 hours"
        assert formatting.wait(1800, 2 * 3600) == "up to 2 hours"
        for low in range(1, 400, 7):
            for high in range(low, 20000, 97):
                words = formatting.wait(low, high)
                assert not re.search(r"\b0\b", words), (low, high, words)
    with override("de"):
        assert formatting.wait(139, 223) == "zwischen 2 und 4 Minuten"


@pytest.mark.django_db
def test_the_queue_answer_gives_the_range_at_the_lines_measured_pace() -> None:
    # given a line that let in 20 tickets over the last two minutes (10 a minute), and a buyer 30 back
    drop = make_drop(slug="paced", quantity=100, waiting_room=True, admission_percent=100)
    services.run_wave(drop)  # the start: an empty draw
    user = make_buyer("tam")
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of("token-tam"))
    for n in range(30):
        services.join(drop=drop, buyer_id=make_buyer(f"ahead{n}").pk)
    services.join(drop=drop, buyer_id=user.pk)
    now = timezone.now()
    Wave.objects.bulk_create(
        Wave(
            drop=drop,
            at=now - timedelta(seconds=5 * i),
            admitted_through=0,
            admitted=1,
            available=100,
            held=0,
        )
        for i in range(20)
    )
    state.refresh([drop.pk], force=True)

    place = Client().get("/api/drops/paced/queue", HTTP_AUTHORIZATION="Bearer token-tam").json()

    assert place["pace_per_minute"] == 10 and place["position"] == 31
    assert (place["eta_low_seconds"], place["eta_high_seconds"]) == state.wait_range(31, 10.0)
    assert place["eta_low_seconds"] < 31 * 6 < place["eta_high_seconds"]  # the mean, 3.1 minutes, inside
