from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password


@pytest.fixture
def make_buyers():
    """Bulk-create n buyers and return their ids."""

    def make(n: int, prefix: str = "racer") -> list[int]:
        User = get_user_model()
        password = make_password(None)
        users = User.objects.bulk_create(User(username=f"{prefix}{i}", password=password) for i in range(n))
        return [u.pk for u in users]

    return make
