"""A raffle's entrants told their result by e-mail (and push, checkout/push.py) through the outbox, once each.

Beat's checkout.announce_raffles writes a message for each entry whose result is known: `won` as
soon as a unit is held for it (the link to pay and the deadline), `lost` once the raffle is decided
for an entry that never had one. A win that lapses passes on (sale/offers.py) and its next entry
hears `won` in turn; a lapsed winner is not written to twice. The page and the socket say the same
live (admission.state.raffle_result).
"""

from __future__ import annotations

import logging

from celery import current_app
from django.db import connection, transaction

from checkout import outbox, push, sql
from checkout.models import OutboxMessage

log = logging.getLogger(__name__)

BATCH = 1000


def announce_raffle_results(*, batch: int = BATCH) -> int:
    """Outbox e-mails for the raffle results now known and not yet written; returns how many written."""
    with transaction.atomic(durable=True):
        with connection.cursor() as cursor:
            cursor.execute(sql.RAFFLE_RESULTS_DUE, {"topic": outbox.RAFFLE_TOPIC, "limit": batch})
            due = cursor.fetchall()
        written = OutboxMessage.objects.bulk_create(
            [
                OutboxMessage(
                    topic=outbox.RAFFLE_TOPIC,
                    key=f"raffle-{ticket}",
                    payload={"ticket": ticket, "drop": drop, "buyer": buyer, "result": result, "hold": hold},
                )
                for ticket, drop, buyer, result, hold in due
            ],
            ignore_conflicts=True,  # the unique (topic, key): one message per entrant, always
        )
        # The entrants who opted into pushes hear it on their phone too, in the same transaction
        # (the e-mail's row decides "not yet written", so the push is written with it, once).
        phones = push.subscriptions_of(buyer for _t, _d, buyer, _r, _h in due)
        OutboxMessage.objects.bulk_create(
            [
                message
                for ticket, drop, buyer, result, hold in due
                for message in push.messages_for(
                    push.RAFFLE,
                    f"raffle-{ticket}",
                    buyer,
                    phones.get(buyer, []),
                    drop=drop,
                    result=result,
                    hold=hold,
                )
            ],
            ignore_conflicts=True,
        )
        if due:
            transaction.on_commit(lambda: current_app.send_task("checkout.relay_outbox"))
    if due:
        log.info("raffle results written to the outbox: %s", len(due))
    return len(written)
