"""The table of scheduled duties, and each duty's one body.

Beat's schedule (CELERY_BEAT_SCHEDULE in config/settings.py), the Celery tasks (registered in
ops/tasks.py) and a web process's cover of a duty Celery is late with (ops/duties.py) all come
from this table, and the Celery task and the cover run the same body: the service function the
duty names. settings.py reads the table before Django's apps are loaded, so it is data alone: a
body is named by its dotted path and looked up where it runs.

A task is named after the package whose service it runs. A name a duty had before stays as an
alias, registered too, so a message beat or the broker still carries under it is run.
"""

from __future__ import annotations

from dataclasses import dataclass

from core import env


@dataclass(frozen=True)
class Duty:
    task: str  # the Celery task's name, and the duty's on the dashboard and in /metrics
    body: str  # dotted path of the function both Celery and the cover call, with no arguments
    every: float  # seconds between beat's runs (unless every_from sets them)
    expires: float  # a beat message still queued after this is dropped: the next is due anyway
    time_limit: int  # seconds before the worker kills a run (a covering web process sets none)
    soft_time_limit: int | None = None  # SoftTimeLimitExceeded raised in the run; None: none
    max_retries: int = 0
    retry_on: tuple[str, ...] = ()  # dotted paths of the exceptions the worker retries a run on
    every_from: str = ""  # the environment variable that sets `every`
    aliases: tuple[str, ...] = ()  # older task names: what was queued or scheduled under them runs

    @property
    def names(self) -> tuple[str, ...]:
        return (self.task, *self.aliases)

    def period(self) -> float:
        """Seconds between beat's runs, as this process's environment sets them."""
        return float(env.integer(self.every_from, int(self.every))) if self.every_from else self.every


DUTIES: dict[str, Duty] = {
    duty.task: duty
    for duty in (
        # The draw at the start, the waves, the snapshots, sold-out.
        Duty(
            "admission.tick", "admission.services.tick", every=1, expires=2, time_limit=20, soft_time_limit=15
        ),
        # Returned units, and units on an exchange, to the next tickets in line. The old name
        # predates the sale package.
        Duty(
            "sale.offer_returns",
            "sale.offers.tick",
            every=1,
            expires=2,
            time_limit=20,
            soft_time_limit=15,
            aliases=("holds.offer_returns",),
        ),
        # Garbage collection, not correctness: overdue holds expired in bounded batches.
        Duty(
            "holds.reclaim_expired_holds",
            "holds.services.sweep_expired",
            every=5,
            expires=10,
            time_limit=55,
            soft_time_limit=50,
            every_from="RECLAIM_EVERY_SECONDS",
        ),
        # The outbox's messages sent; also sent by name after each commit that writes one.
        Duty("checkout.relay_outbox", "checkout.outbox.relay_outbox", every=5, expires=10, time_limit=60),
        # Who asked hears when a drop opens; a lock wait past its timeout is tried again.
        Duty(
            "checkout.send_reminders",
            "checkout.reminders.send_due_reminders",
            every=5,
            expires=10,
            time_limit=60,
            max_retries=5,
            retry_on=("django.db.OperationalError",),
            every_from="REMINDERS_EVERY_SECONDS",
        ),
        # Each raffle entrant hears their result.
        Duty(
            "checkout.announce_raffles",
            "checkout.raffles.announce_raffle_results",
            every=5,
            expires=10,
            time_limit=60,
        ),
        # A subscribed phone hears "your turn" (checkout/push.py).
        Duty("checkout.announce_turns", "checkout.push.announce_turns", every=1, expires=2, time_limit=30),
        # The payment saga's safety nets: what a lost task left.
        Duty("checkout.sweep", "checkout.services.sweep", every=10, expires=10, time_limit=30),
        Duty(
            "checkout.settle_unsettled_payments",
            "checkout.services.settle_unsettled_payments",
            every=30,
            expires=30,
            time_limit=30,
        ),
        # A drop on sale that drifts is paused.
        Duty(
            "ops.watch_invariants",
            "ops.switch.watch_invariants",
            every=5,
            expires=10,
            time_limit=30,
            soft_time_limit=25,
            every_from="WATCHDOG_EVERY_SECONDS",
        ),
        # A killed rehearsal's buyers go all the same.
        Duty(
            "ops.end_rehearsals",
            "ops.rehearsal.end_overdue",
            every=30,
            expires=30,
            time_limit=120,
            soft_time_limit=100,
        ),
        # The hour before a waiting room's start: can the draw read its drand round? (ops/preflight.py)
        Duty(
            "ops.check_draw_beacons",
            "ops.preflight.check_draw_beacons",
            every=60,
            expires=60,
            time_limit=60,
            soft_time_limit=50,
        ),
    )
}

# Every name a duty's task answers to, old ones too.
BY_NAME: dict[str, Duty] = {name: duty for duty in DUTIES.values() for name in duty.names}


def beat_schedule() -> dict[str, dict[str, object]]:
    """CELERY_BEAT_SCHEDULE: every duty on its period, each entry named after its task."""
    return {
        duty.task: {"task": duty.task, "schedule": duty.period(), "options": {"expires": duty.expires}}
        for duty in DUTIES.values()
    }
