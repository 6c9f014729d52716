"""Make presale codes for a drop: `manage.py presale_codes SLUG --count N [--uses M] [--json]`."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import InvalidInput
from holds import presale
from shop.models import Drop


class Command(BaseCommand):
    help = "Make N new presale codes for a drop and print them (CSV: code,max_uses,uses; or one JSON line)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "--count", type=int, required=True, help=f"codes to make (1 to {presale.GENERATE_MAX})"
        )
        parser.add_argument(
            "--uses", type=int, default=1, help="claims each code admits (default 1: single-use)"
        )
        parser.add_argument("--json", action="store_true", help='one JSON line {"slug", "max_uses", "codes"}')

    def handle(self, *args: object, **opts: Any) -> None:  # argparse's values
        drop = Drop.objects.filter(slug=str(opts["slug"])).first()
        if drop is None:
            raise CommandError(f"no drop called {opts['slug']!r}")
        try:
            made = presale.generate_codes(drop=drop, count=int(opts["count"]), max_uses=int(opts["uses"]))
        except InvalidInput as error:
            raise CommandError(f"no codes made: {error.detail}") from None
        if opts["json"]:
            codes = [c.code for c in made]
            self.stdout.write(json.dumps({"slug": drop.slug, "max_uses": int(opts["uses"]), "codes": codes}))
            return
        self.stdout.write("code,max_uses,uses")
        for code in made:
            self.stdout.write(f"{code.code},{code.max_uses},{code.uses}")
