"""CSV cells a spreadsheet opens as text: an export must not become a formula on a merchant's screen."""

from __future__ import annotations

# What Excel, LibreOffice and Google Sheets start a formula (or a DDE call) with.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(cell: object) -> object:
    """Quote a text cell a spreadsheet would run as a formula; anything else, empty text too, as it is."""
    if isinstance(cell, str) and cell.startswith(FORMULA_STARTS):
        return f"'{cell}"
    return cell
