"""Reminders ("tell me when it opens"): a buyer's reminder of a drop, and its e-mail once the sale opens.

A reminder is one row per (drop, buyer) (a unique constraint: a second click, another web
process, the same answer). Once the drop opens (its start, or its waiting room's opening),
`send_due_reminders` marks each reminder sent and writes its e-mail's outbox row (and a push to
each browser the buyer opted in from, checkout/push.py) in one transaction, so a reminder becomes
exactly one message whoever runs it (beat's worker, a second worker, a retried task, a web process
covering the duty: ops/duties.py); the outbox relays it (checkout/outbox.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from celery import current_app
from django.db import connection, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy

from admission.work import ROOM_OPENS
from catalogue import selectors as catalogue
from checkout import outbox, push, sql
from checkout.models import OutboxMessage, Reminder
from core.errors import FloodgateError, NotFound, fill
from shop.models import Drop

log = logging.getLogger(__name__)

BATCH = 500  # reminders marked and written per transaction
ROOM_LEAD = int(ROOM_OPENS.total_seconds())  # sql.REMINDED_AT: a waiting room's reminders go this early


class AlreadyOpen(FloodgateError):
    code, status = "not_scheduled", 409


def reminded_at(drop: Drop) -> datetime:
    """When the drop's reminders go: its start, or its waiting room's opening (sql.REMINDED_AT)."""
    return drop.starts_at - ROOM_OPENS if drop.waiting_room else drop.starts_at


@dataclass(frozen=True)
class Asked:
    reminder_id: int
    new: bool  # False: this buyer had asked already


def ask_reminder(*, drop: Drop, buyer_id: int) -> Asked:
    """The buyer's reminder of a drop whose reminders have not gone (reminded_at); AlreadyOpen from then on.
    A rehearsal's account is refused a real drop's (Forbidden): it would be e-mailed about a sale
    it cannot buy from."""
    catalogue.check_audience(drop, buyer_id=buyer_id)
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(sql.ASK_REMINDER, {"drop": drop.pk, "buyer": buyer_id, "room_lead": ROOM_LEAD})
        row = cursor.fetchone()
    if row is not None:
        log.info("reminder %s of drop %s asked", row[0], drop.pk)
        return Asked(reminder_id=row[0], new=True)
    existing = (
        Reminder.objects.filter(drop_id=drop.pk, buyer_id=buyer_id).values_list("pk", flat=True).first()
    )
    if existing is not None:
        return Asked(reminder_id=existing, new=False)
    if drop.waiting_room and drop.starts_at > timezone.now():
        raise AlreadyOpen(
            fill(
                gettext_lazy("The waiting room of %(display_title)s is open already: join it now."),
                display_title=drop.display_title,
            )
        )
    raise AlreadyOpen(
        fill(
            gettext_lazy("%(display_title)s is not waiting to open any more: no reminder is needed."),
            display_title=drop.display_title,
        )
    )


def cancel_reminder(*, drop: Drop, buyer_id: int) -> bool:
    """Forget the buyer's reminder if it has not gone out; False when there was none to forget."""
    deleted, _ = Reminder.objects.filter(drop_id=drop.pk, buyer_id=buyer_id, sent_at__isnull=True).delete()
    return deleted > 0


def cancel_all_reminders(*, buyer_id: int) -> int:
    """A reminder's one-click unsubscribe: every reminder of the buyer not gone out yet is forgotten
    (a new one is only made when they ask for it again). Returns how many."""
    deleted, _ = Reminder.objects.filter(buyer_id=buyer_id, sent_at__isnull=True).delete()
    return deleted


def has_reminder(*, drop_id: int, buyer_id: int) -> bool:
    return Reminder.objects.filter(drop_id=drop_id, buyer_id=buyer_id).exists()


def reminder_of(*, drop_id: int, buyer_id: int) -> Reminder | None:
    """The buyer's reminder of a drop, sent or not; None when there is none."""
    return Reminder.objects.filter(drop_id=drop_id, buyer_id=buyer_id).first()


def send_due_reminders(*, batch: int = BATCH, most: int = 20 * BATCH) -> int:
    """Turn the reminders of every open drop into outbox e-mails, a batch per transaction; returns
    how many this call wrote. A failed batch (its transaction rolled back) leaves its reminders
    for the next run; batches before it stay written."""
    written = 0
    while written < most:
        with transaction.atomic(durable=True):
            with connection.cursor() as cursor:
                cursor.execute(sql.REMINDER_LOCK_TIMEOUT)
                cursor.execute(
                    sql.TAKE_DUE_REMINDERS, {"limit": min(batch, most - written), "room_lead": ROOM_LEAD}
                )
                taken = cursor.fetchall()
            OutboxMessage.objects.bulk_create(
                [
                    OutboxMessage(
                        topic=outbox.REMINDER_TOPIC,
                        key=f"reminder-{reminder}",
                        payload={"reminder": reminder, "drop": drop, "buyer": buyer},
                    )
                    for reminder, drop, buyer in taken
                ],
                ignore_conflicts=True,  # the unique (topic, key): a reminder is one message, always
            )
            # and a push to each browser the buyer opted in from (none while push is off)
            phones = push.subscriptions_of(buyer for _r, _d, buyer in taken)
            OutboxMessage.objects.bulk_create(
                [
                    message
                    for reminder, drop, buyer in taken
                    for message in push.messages_for(
                        push.REMINDER, f"reminder-{reminder}", buyer, phones.get(buyer, []), drop=drop
                    )
                ],
                ignore_conflicts=True,
            )
            if taken:
                transaction.on_commit(_relay)
        written += len(taken)
        if len(taken) < batch:
            break
    if written:
        log.info("reminders written to the outbox: %s", written)
    return written


def _relay() -> None:
    current_app.send_task("checkout.relay_outbox")


def drop_for_reminder(*, slug: str) -> Drop:
    """A drop a buyer may be reminded of: any but a rehearsal's copy (hidden everywhere)."""
    found = Drop.objects.select_related("product").filter(slug=slug, rehearsal_of__isnull=True).first()
    if found is None:
        raise NotFound(gettext_lazy("There is no drop at this address."))
    return found
