"""Which drops beat's tick looks after (snapshots, the gate's reset): a presale counts as a start."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from catalogue.selectors import active_drops
from tests.factories import make_drop

pytestmark = pytest.mark.django_db


def test_a_presale_opening_within_the_hour_is_looked_after_before_its_public_start() -> None:
    now = timezone.now()
    later = now + timedelta(hours=3)
    presale = make_drop(
        slug="early",
        starts_at=later,
        ends_at=later + timedelta(hours=1),
        presale_starts_at=now + timedelta(minutes=30),
    )
    plain = make_drop(slug="plain", starts_at=later, ends_at=later + timedelta(hours=1))  # the control
    soon = make_drop(slug="soon", starts_at=now + timedelta(minutes=30))

    ticked = {drop.slug for drop in active_drops(now)}

    assert presale.slug in ticked and soon.slug in ticked
    assert plain.slug not in ticked
