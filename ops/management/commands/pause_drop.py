"""The kill switch from a shell: `manage.py pause_drop SLUG --reason TEXT`."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import InvalidInput
from ops import switch
from shop.models import Drop


class Command(BaseCommand):
    help = "Pause a drop now: no claim succeeds after this returns. Logged with the reason."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--reason", required=True)

    def handle(self, *args: object, **opts: object) -> None:
        drop = Drop.objects.filter(slug=str(opts["slug"])).first()
        if drop is None:
            raise CommandError(f"no drop called {opts['slug']!r}")
        try:
            result = switch.pause_drop(drop=drop, actor_id=None, reason=str(opts["reason"]))
        except InvalidInput as error:
            raise CommandError(error.detail) from None
        self.stdout.write(json.dumps({"state": result.state, "changed": result.changed}))
