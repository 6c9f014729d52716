"""The beat sweeper, in a real Celery worker process, gives expired holds back; the CLI shows it."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from catalogue.services import NewVariant
from holds import services
from holds.counts import invariant
from holds.models import Hold
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)


def test_beat_sweeps_expired_holds_without_anyone_asking(celery_with_beat: subprocess.Popen) -> None:
    # given two holds, one of them already past its time
    drop = make_drop(slug="swept", quantity=5, buckets=2, per_buyer_limit=2)
    stale = services.reserve(
        drop=drop, buyer_id=make_buyer().pk, quantity=2, idempotency_key=uuid.uuid4().hex
    ).hold
    fresh = services.reserve(
        drop=drop, buyer_id=make_buyer().pk, quantity=1, idempotency_key=uuid.uuid4().hex
    ).hold
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE holds_hold SET created_at = now() - interval '1 hour',"
            " expires_at = now() - interval '1 second' WHERE id = %s",
            [stale.pk],
        )

    # when the worker's beat has had time to run the sweeper
    deadline = time.monotonic() + 60
    while Hold.objects.get(pk=stale.pk).state == "held" and time.monotonic() < deadline:
        assert celery_with_beat.poll() is None, "the celery worker died"
        time.sleep(0.5)

    # then the stale hold expired and its units are back; the fresh one is untouched
    assert Hold.objects.get(pk=stale.pk).state == "expired"
    assert Hold.objects.get(pk=fresh.pk).state == "held"
    numbers = invariant(drop_id=drop.pk)
    assert (numbers.available, numbers.held, numbers.expired_holds, numbers.drift) == (4, 1, 1, 0)


def test_check_invariant_prints_json_and_fails_on_drift() -> None:
    drop = make_drop(slug="checked", quantity=7, buckets=3)
    out = StringIO()

    call_command("check_invariant", "checked", stdout=out)
    assert json.loads(out.getvalue()) == {
        "quantity": 7,
        "available": 7,
        "held": 0,
        "sold": 0,
        "refunded": 0,
        "exchange": 0,
        "expired_unreclaimed": 0,
        "expired_holds": 0,
        "drift": 0,
        "variants": [
            {
                "name": "",
                "quantity": 7,
                "available": 7,
                "held": 0,
                "sold": 0,
                "refunded": 0,
                "exchange": 0,
                "drift": 0,
            }
        ],
    }

    with connection.cursor() as cursor:  # a unit appears behind the app's back
        cursor.execute(
            "UPDATE inventory_stockbucket SET available = available + 1 WHERE drop_id = %s AND index = 0",
            [drop.pk],
        )
    with pytest.raises(CommandError, match="drift of -1") as error:
        call_command("check_invariant", "checked", stdout=StringIO())
    assert error.value.returncode == 1
    with pytest.raises(CommandError, match="no drop"):
        call_command("check_invariant", "no-such-drop", stdout=StringIO())


def test_check_invariant_fails_on_drift_in_one_variant_that_the_drop_total_hides() -> None:
    sizes = [NewVariant("M", 3), NewVariant("L", 3)]
    drop = make_drop(slug="sizes-checked", quantity=6, buckets=1, variants=sizes)
    m, l_size = drop.variants.all()
    call_command("check_invariant", "sizes-checked", stdout=StringIO())  # exact: exit 0

    with connection.cursor() as cursor:  # a unit of M moved to L behind the app's back: total unchanged
        cursor.execute("UPDATE inventory_stockbucket SET available = 2 WHERE variant_id = %s", [m.pk])
        cursor.execute("UPDATE inventory_stockbucket SET available = 4 WHERE variant_id = %s", [l_size.pk])
    out = StringIO()
    with pytest.raises(CommandError, match="drift in variants of drop sizes-checked: M: 1, L: -1") as error:
        call_command("check_invariant", "sizes-checked", stdout=out)

    assert error.value.returncode == 1
    printed = json.loads(out.getvalue())
    assert printed["drift"] == 0 and [v["drift"] for v in printed["variants"]] == [1, -1]
