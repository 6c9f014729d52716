"""Undo the kill switch from a shell: `manage.py resume_drop SLUG`."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from ops import switch
from shop.models import Drop


class Command(BaseCommand):
    help = "Resume a paused drop."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--reason", default="")

    def handle(self, *args: object, **opts: object) -> None:
        drop = Drop.objects.filter(slug=str(opts["slug"])).first()
        if drop is None:
            raise CommandError(f"no drop called {opts['slug']!r}")
        result = switch.resume_drop(drop=drop, actor_id=None, reason=str(opts["reason"]))
        self.stdout.write(json.dumps({"state": result.state, "changed": result.changed}))
