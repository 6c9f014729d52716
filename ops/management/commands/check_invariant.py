"""Print a drop's invariant as JSON, with a row per variant; exit status 1 on drift in any."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from holds.counts import invariant, invariant_by_variant
from shop.models import Drop


class Command(BaseCommand):
    help = (
        "Check available + held + sold + refunded + exchange = quantity for a drop and each of its variants; "
        "exit 1 on drift in any."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")

    def handle(self, *args: object, **opts: object) -> None:
        drop = Drop.objects.filter(slug=str(opts["slug"])).first()
        if drop is None:
            raise CommandError(f"no drop called {opts['slug']!r}")
        numbers = invariant(drop_id=drop.pk)
        variants = invariant_by_variant(drop_id=drop.pk)
        self.stdout.write(json.dumps({**numbers.as_json(), "variants": [v.as_json() for v in variants]}))
        if numbers.drift:
            raise CommandError(f"drift of {numbers.drift} units in drop {drop.slug}", returncode=1)
        if drifting := [v for v in variants if v.drift]:
            named = ", ".join(f"{v.name or '(the one variant)'}: {v.drift}" for v in drifting)
            raise CommandError(f"drift in variants of drop {drop.slug}: {named}", returncode=1)
        if sum(v.quantity for v in variants) != numbers.quantity:
            raise CommandError(
                f"the variants of drop {drop.slug} add up to {sum(v.quantity for v in variants)} units, "
                f"not its {numbers.quantity}",
                returncode=1,
            )
