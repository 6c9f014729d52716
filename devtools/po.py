"""Compile the shop's translations without GNU gettext: locale/*/LC_MESSAGES/django.po -> django.mo.

`python -m devtools.po` compiles every language; `python -m devtools.po --check` only says which
.mo is missing, stale, or has a fuzzy or untranslated message (the test suite runs the same check).
Babel reads and writes the files (pure Python, already a dependency for money formats); the output
is deterministic, so the committed .mo is byte-for-byte what its .po compiles to.

A new language: `manage.py makemessages -l xx` (needs GNU gettext's xgettext on the dev machine),
translate locale/xx/LC_MESSAGES/django.po, run this, add ("xx", "Name") to LANGUAGES.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
LOCALE_DIR = ROOT / "locale"


def catalogs(locale_dir: Path = LOCALE_DIR) -> list[Path]:
    return sorted(locale_dir.glob("*/LC_MESSAGES/django.po"))


def read(po_path: Path) -> Catalog:
    with po_path.open("rb") as handle:
        return read_po(handle, locale=po_path.parent.parent.name)


def compiled(po_path: Path) -> bytes:
    """The .mo bytes of a .po: fuzzy messages left out (Django would show them unreviewed)."""
    out = io.BytesIO()
    write_mo(out, read(po_path), use_fuzzy=False)
    return out.getvalue()


def problems(po_path: Path) -> list[str]:
    """What keeps a language from being complete: fuzzy or empty translations, a stale .mo."""
    found = []
    for message in read(po_path):
        if not message.id:
            continue  # the header
        msgid = message.id if isinstance(message.id, str) else message.id[0]
        strings = message.string if isinstance(message.string, tuple | list) else (message.string,)
        if message.fuzzy:
            found.append(f"{po_path}: fuzzy: {msgid!r}")
        elif not all(strings):
            found.append(f"{po_path}: untranslated: {msgid!r}")
    mo_path = po_path.with_suffix(".mo")
    if not mo_path.exists() or mo_path.read_bytes() != compiled(po_path):
        found.append(f"{mo_path}: not compiled from its .po (run `python -m devtools.po`)")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report problems, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        found = [problem for po in catalogs() for problem in problems(po)]
        for problem in found:
            print(problem, file=sys.stderr)  # noqa: T201
        return 1 if found else 0
    for po in catalogs():
        po.with_suffix(".mo").write_bytes(compiled(po))
        print(f"compiled {po.with_suffix('.mo').relative_to(ROOT)}")  # noqa: T201
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
