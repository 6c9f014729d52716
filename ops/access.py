"""Who may watch a sale's numbers: the dashboard, the ops invariant API and /metrics show the
same counts, so one rule decides all three (staff holding the drop's view permission or the kill
switch's; the Merchants and On-call groups hold one each)."""

from __future__ import annotations

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AbstractUser, AnonymousUser

WATCH_PERMISSIONS = ("shop.view_drop", "shop.pause_drop")


def may_watch(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    """Whether this user may read the invariant, the dashboard and the metrics."""
    if not isinstance(user, AbstractUser) or not (user.is_active and user.is_staff):
        return False
    return any(user.has_perm(permission) for permission in WATCH_PERMISSIONS)
