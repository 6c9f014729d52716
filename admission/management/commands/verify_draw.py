"""manage.py verify_draw SLUG [--json FILE|URL]: redo a waiting room's draw from its published JSON.

The seed against its committed hash, the entry list against its hash, the drand round's BLS
signature against the chain's public key, and the order. Exit 0: verified, and tied to a drand
round whose signature verifies (nobody could choose the order); 1: a mismatch (each printed); 2:
nothing to check yet; 3: the draw adds up but rests on the shop's seed alone (no round read): it
says what a buyer must then trust, and does not pass as verified.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from admission import draw, services
from catalogue import selectors as catalogue
from core import documents
from core.errors import FloodgateError

SEED_ONLY = 3  # the exit code of a draw on the seed alone (docs/API.md)


class Command(BaseCommand):
    help = "Recompute a drop's waiting-room draw from the published JSON; exit 1 on a mismatch."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "--json",
            dest="source",
            help="The published draw as a file or an http(s) URL (default: read it as the API does)",
        )

    def handle(self, *args: object, **opts: object) -> None:
        body = self.published(str(opts["slug"]), opts.get("source"))
        if body.get("drawn") is not True:
            self.stdout.write(f"not drawn yet; seed_sha256 {body.get('seed_sha256')}")
            raise SystemExit(2)
        problems = draw.check(body)
        for problem in problems:
            self.stderr.write(f"MISMATCH: {problem}")
        if problems:
            raise SystemExit(1)
        for note in draw.notes(body):
            self.stdout.write(f"NOTE: {note}")
        entries = body.get("entries")
        count = len(entries) if isinstance(entries, list) else 0
        listed = f"{count} entries, entries_sha256 {body.get('entries_sha256')}"
        if not draw.unsteerable(body):
            self.stdout.write(f"SEED ONLY, not verified as unsteerable: {listed} add up. {draw.trust(body)}")
            raise SystemExit(SEED_ONLY)
        self.stdout.write(f"verified: {listed}, drand round {body.get('beacon_round')} verified")

    def published(self, slug: str, source: object) -> dict[str, object]:
        try:
            if isinstance(source, str):
                body = documents.read_json(source)
            else:
                body = services.draw_entries(drop=catalogue.drop_for_claim(slug=slug))
        except (*documents.READ_ERRORS, FloodgateError) as error:
            raise CommandError(f"cannot read the published draw of {slug}: {error}") from None
        if not isinstance(body, dict):
            raise CommandError("the published draw is not a JSON object")
        return body
