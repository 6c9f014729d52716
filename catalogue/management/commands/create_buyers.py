"""Create API buyers in bulk: one JSON line per buyer with username, password and token."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalogue import services
from core.errors import InvalidInput


class Command(BaseCommand):
    help = "Create N buyers sharing one password, each with a bearer token; prints JSON lines."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--count", type=int, required=True)
        parser.add_argument("--prefix", default="buyer")

    def handle(self, *args: object, **opts: Any) -> None:  # argparse's values
        try:
            buyers = services.create_buyers(count=int(opts["count"]), prefix=str(opts["prefix"]))
        except InvalidInput as error:
            raise CommandError(error.detail) from None
        self.stdout.write(
            "\n".join(
                json.dumps({"username": b.username, "password": b.password, "token": b.token}) for b in buyers
            )
        )
