"""collapse_buckets gathers a drop's last units and says which bucket can serve the claim."""

from __future__ import annotations

import pytest

from holds.counts import invariant
from inventory.models import StockBucket
from inventory.selectors import bucket_levels
from inventory.services import collapse_buckets
from tests.factories import make_drop

pytestmark = pytest.mark.django_db(transaction=True)


def test_collapse_moves_every_unit_into_the_first_bucket_and_returns_it() -> None:
    drop = make_drop(quantity=10, buckets=5)  # 2 units in each bucket: nobody can take 3

    assert collapse_buckets(drop_id=drop.pk, variant_id=drop.variants.get().pk, quantity=3) == 0
    assert bucket_levels(drop_id=drop.pk) == [10, 0, 0, 0, 0]
    assert invariant(drop_id=drop.pk).drift == 0


def test_a_bucket_that_can_already_serve_is_returned_without_a_collapse() -> None:
    drop = make_drop(quantity=10, buckets=5)
    # Another collapser's work, or a release, left bucket 3 able to serve 4 units.
    StockBucket.objects.filter(drop=drop).update(available=0)
    StockBucket.objects.filter(drop=drop, index=3).update(available=10)

    assert collapse_buckets(drop_id=drop.pk, variant_id=drop.variants.get().pk, quantity=4) == 3
    assert bucket_levels(drop_id=drop.pk) == [0, 0, 0, 10, 0]  # untouched
