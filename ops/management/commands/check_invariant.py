"""Print a drop's invariant as JSON; exit status 1 on drift."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from holds.counts import invariant
from shop.models import Drop


class Command(BaseCommand):
    help = "Check available + held + sold = quantity for a drop; exit 1 on drift."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")

    def handle(self, *args: object, **opts: object) -> None:
        drop = Drop.objects.filter(slug=str(opts["slug"])).first()
        if drop is None:
            raise CommandError(f"no drop called {opts['slug']!r}")
        numbers = invariant(drop_id=drop.pk)
        self.stdout.write(json.dumps(numbers.as_json()))
        if numbers.drift:
            raise CommandError(f"drift of {numbers.drift} units in drop {drop.slug}", returncode=1)
