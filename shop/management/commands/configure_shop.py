"""`manage.py configure_shop`: set the shop's identity (shop.setup.configure) from a script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import FloodgateError
from shop import identity, setup


class Command(BaseCommand):
    help = (
        "Set the shop's identity: what buyers see on every page, e-mail and payment instead of the "
        "software's name. Bad input changes nothing. Options left out keep their value."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="What buyers call the shop.")
        parser.add_argument("--legal-name", required=True, help="The seller's registered name.")
        parser.add_argument(
            "--address", required=True, help=r"The postal address; \n or new lines between lines."
        )
        parser.add_argument("--contact-email", required=True)
        parser.add_argument(
            "--vat-id", help="e.g. DE123456789 (an EU country's two letters, then its number)."
        )
        parser.add_argument("--logo", type=Path, help="A PNG, JPEG or WebP file of at most 1 MB.")
        parser.add_argument("--accent-colour", help="#RRGGBB")
        parser.add_argument("--support-url")
        parser.add_argument("--prices-include-tax", choices=["yes", "no"])

    def handle(self, *args: object, **opts: Any) -> None:  # argparse's values
        logo = _read_logo(opts["logo"]) if opts["logo"] is not None else None
        include = opts["prices_include_tax"]
        try:
            row = setup.configure(
                name=opts["name"],
                legal_name=opts["legal_name"],
                address=opts["address"],
                contact_email=opts["contact_email"],
                vat_id=opts["vat_id"],
                logo=logo,
                accent_colour=opts["accent_colour"],
                support_url=opts["support_url"],
                prices_include_tax=None if include is None else include == "yes",
            )
        except FloodgateError as error:
            raise CommandError(f"Nothing changed: {error.detail}") from None
        self.stdout.write(f"shop identity set: {row.name} ({row.legal_name})")


def _read_logo(path: Path) -> SimpleUploadedFile:
    try:
        with path.open("rb") as file:
            content = file.read(identity.LOGO_MAX_BYTES + 1)  # enough to know it is too large
    except OSError as error:
        raise CommandError(f"Nothing changed: cannot read the logo {path}: {error.strerror}") from None
    return SimpleUploadedFile(path.name, content)
