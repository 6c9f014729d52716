"""The kill switch and the invariant watchdog: pause a drop at the arbiter, then tell every edge."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.contrib.admin.models import CHANGE, LogEntry
from django.db import connection, transaction
from django.utils import timezone

from admission import state
from core import metrics
from core.errors import InvalidInput
from core.text import storable
from holds.counts import invariant
from ops import sql
from shop.models import Drop, PauseAction

log = logging.getLogger(__name__)

DRAIN_TIMEOUT = 3.0
REASON_MAX = 300


@dataclass(frozen=True)
class SwitchResult:
    state: str
    changed: bool
    drained: bool = True


def pause_drop(*, drop: Drop, actor_id: int | None, reason: str) -> SwitchResult:
    """Pause a drop at the arbiter and return once no claim that could miss the pause is running.

    The claim statements read `paused`; a claim statement already running when the pause
    commits may still finish, so this waits (bounded) for every transaction older than
    the commit. After it returns, no hold of this drop can still be created.
    """
    reason = reason.strip()
    if not reason:
        raise InvalidInput("Say why the sale is paused (it is logged and shown on the dashboard).")
    if len(reason) > REASON_MAX:
        raise InvalidInput(f"Keep the reason under {REASON_MAX} characters.")
    if not storable(reason):
        raise InvalidInput("The reason has a character that cannot be stored (NUL or invalid Unicode).")
    params = {"drop": drop.pk, "actor": actor_id, "reason": reason, "action": PauseAction.PAUSED}
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(sql.PAUSE_DROP, params)
        changed = cursor.fetchone() is not None
        if changed:
            cursor.execute(sql.RECORD_PAUSE_EVENT, params)
    # Only the call that paused waits for the claims already in flight.
    drained = _wait_for_older_transactions() if changed else True
    if changed:
        log.warning("drop %s paused by %s: %s", drop.pk, actor_id or "watchdog", reason)
        _log_admin_action(drop, actor_id, f"Paused: {reason}")
        _announce(drop)
    drop.refresh_from_db()
    return SwitchResult(state=drop.state.value, changed=changed, drained=drained)


def resume_drop(*, drop: Drop, actor_id: int | None, reason: str = "") -> SwitchResult:
    params = {
        "drop": drop.pk,
        "actor": actor_id,
        "reason": reason.strip()[:REASON_MAX] if storable(reason) else "",  # optional: bad is none
        "action": PauseAction.RESUMED,
    }
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(sql.RESUME_DROP, params)
        changed = cursor.fetchone() is not None
        if changed:
            cursor.execute(sql.RECORD_PAUSE_EVENT, params)
    if changed:
        log.warning("drop %s resumed by %s", drop.pk, actor_id)
        _log_admin_action(drop, actor_id, "Resumed" + (f": {params['reason']}" if params["reason"] else ""))
        _announce(drop)
    drop.refresh_from_db()
    return SwitchResult(state=drop.state.value, changed=changed)


def _announce(drop: Drop) -> None:
    """Tell every web process and waiting buyer now (the edge answers "paused" within a second)."""
    state.refresh([drop.pk], force=True)


def _wait_for_older_transactions() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(sql.CLOCK)
        (since,) = cursor.fetchone()
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while True:
            cursor.execute(sql.OLDER_TRANSACTIONS, {"since": since})
            if cursor.fetchone()[0] == 0:
                return True
            if time.monotonic() > deadline:
                log.warning("pause: transactions older than the pause still open after %ss", DRAIN_TIMEOUT)
                return False
            time.sleep(0.005)


def _log_admin_action(drop: Drop, actor_id: int | None, message: str) -> None:
    if actor_id is None:
        return  # the admin log needs a person; PauseEvent records the watchdog
    LogEntry.objects.log_actions(
        user_id=actor_id, queryset=[drop], action_flag=CHANGE, change_message=message, single_object=True
    )


def watch_invariants() -> int:
    """Pause before you oversell: any drop on sale whose invariant drifts is paused now."""
    now = timezone.now()
    drifting = 0
    for drop in Drop.objects.filter(starts_at__lte=now, ends_at__gt=now, paused=False):
        numbers = invariant(drop_id=drop.pk)
        if numbers.drift == 0:
            continue
        drifting += 1
        log.error(
            "invariant drift in drop %s (%s): quantity=%s available=%s held=%s sold=%s drift=%s",
            drop.pk,
            drop.slug,
            numbers.quantity,
            numbers.available,
            numbers.held,
            numbers.sold,
            numbers.drift,
        )
        metrics.record_drift(drop_id=drop.pk)
        pause_drop(drop=drop, actor_id=None, reason="invariant drift")
    return drifting
