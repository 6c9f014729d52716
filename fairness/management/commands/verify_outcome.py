"""manage.py verify_outcome SLUG ENTRY [--json FILE|URL] [--root HEX]: check one entry's outcome
against the drop's published Merkle root, from its inclusion proof.

The proof document is GET /api/drops/<slug>/report/entries/<entry> (a saved file, a URL, or, by
default, read as that API does). --root: a root published elsewhere (the shop's post, a copy taken
when the report appeared), to compare as well. Exit 0: the outcome is in the tree; 1: it is not
(each problem printed); 2: no report yet.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalogue import selectors as catalogue
from core import documents
from core.errors import FloodgateError
from fairness import services


class Command(BaseCommand):
    help = "Check an entry's outcome against a drop's published Merkle root; exit 1 if it is not in the tree."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("entry", type=int)
        parser.add_argument("--json", dest="source", help="The inclusion proof as a file or an http(s) URL")
        parser.add_argument("--root", help="A root (hex) published elsewhere, to compare with")

    def handle(self, *args: object, **opts: Any) -> None:
        slug, entry = str(opts["slug"]), int(opts["entry"])
        document = self.document(slug, entry, opts.get("source"))
        problems = services.check(document, entry=entry, root=opts.get("root"))
        for problem in problems:
            self.stderr.write(f"MISMATCH: {problem}")
        if problems:
            raise SystemExit(1)
        self.stdout.write(
            f"verified: {document['leaf']} is in the tree of {document['size']}, root {document['root']}"
        )

    def document(self, slug: str, entry: int, source: object) -> dict[str, Any]:
        try:
            if isinstance(source, str):
                body = documents.read_json(source)
            else:
                drop = catalogue.drop_for_claim(slug=slug)
                body = services.inclusion(services.report(drop), entry=entry)
        except services.NotPublished as error:
            self.stdout.write(f"no report yet: {error.detail}")
            raise SystemExit(2) from None
        except (*documents.READ_ERRORS, FloodgateError) as error:
            raise CommandError(f"cannot read entry {entry}'s proof for {slug}: {error}") from None
        if not isinstance(body, dict):
            raise CommandError("the proof is not a JSON object")
        return body
