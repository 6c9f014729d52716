"""The hour before a waiting room opens its sale: can the shop read the public round its draw needs?

Each run asks the drand relays for the latest round of every waiting room starting within the hour
and verifies it, as the draw will. A failure is kept on the queue (floodgate_draw_beacon_unreachable,
the alert FloodgateDrawBeaconUnreachable pages on-call) and e-mailed to the merchant once per drop.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from admission import drawing
from catalogue import selectors as catalogue
from checkout import outbox


def check_draw_beacons(*, now: datetime | None = None) -> int:
    """Check every waiting room starting within the hour; how many cannot reach their round."""
    now = now or timezone.now()
    failed = 0
    for drop in catalogue.active_drops(now):
        if not drop.waiting_room or not now < drop.starts_at <= now + drawing.PREFLIGHT_AHEAD:
            continue
        checked = drawing.check_relays(drop=drop, now=now)  # HTTP: outside the transaction
        if checked is None:
            continue
        failed += not checked.ok
        with transaction.atomic(durable=True):
            if drawing.record_preflight(checked, now=now):
                outbox.announce_draw_beacon_unreachable(
                    drop_id=drop.pk, round=checked.round, note=checked.note
                )
    return failed
