"""Every entry's outcome, written as the leaf the report's tree commits to.

A leaf is one line anyone can read and hash: "entry=<id>;place=<n or ->;admitted=<0|1>;offered=<n>;
expired=<n>;bought=<n>;refunded=<n>;banned=<0|1>" (fairness/merkle.py hashes its UTF-8 bytes).
Entries are the tickets' public ids (published in the draw already); nothing else about a buyer is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.db import connection

from fairness import merkle, sql

LEAF = re.compile(
    r"entry=(?P<entry>[0-9]+);place=(?P<place>[0-9]+|-);admitted=(?P<admitted>[01]);"
    r"offered=(?P<offered>[0-9]+);expired=(?P<expired>[0-9]+);bought=(?P<bought>[0-9]+);"
    r"refunded=(?P<refunded>[0-9]+);banned=(?P<banned>[01])"
)


@dataclass(frozen=True)
class Outcome:
    entry: int
    place: int | None  # None: an early joiner the draw never numbered (the drop had no start)
    admitted: bool
    offered: int  # returned units offered to this entry (0 or 1: one offer per ticket, ever)
    expired: int  # holds of this buyer that ran out unpaid
    bought: int  # units paid for
    refunded: int  # of those, units refunded
    banned: bool  # the account was deactivated: the line skipped it

    @property
    def leaf(self) -> str:
        place = "-" if self.place is None else str(self.place)
        return (
            f"entry={self.entry};place={place};admitted={int(self.admitted)};offered={self.offered};"
            f"expired={self.expired};bought={self.bought};refunded={self.refunded};banned={int(self.banned)}"
        )


def parse(leaf: str) -> Outcome | None:
    found = LEAF.fullmatch(leaf)
    if found is None:
        return None
    place = found["place"]
    return Outcome(
        entry=int(found["entry"]),
        place=None if place == "-" else int(place),
        admitted=found["admitted"] == "1",
        offered=int(found["offered"]),
        expired=int(found["expired"]),
        bought=int(found["bought"]),
        refunded=int(found["refunded"]),
        banned=found["banned"] == "1",
    )


def of_drop(drop_id: int) -> list[Outcome]:
    """Each entry's outcome from the database, in entry order (the tree's leaf order)."""
    with connection.cursor() as cursor:
        cursor.execute(sql.OUTCOMES, {"drop": drop_id})
        return [Outcome(*row) for row in cursor.fetchall()]


def root_of(leaves: list[str]) -> str:
    return merkle.root([merkle.leaf_hash(leaf) for leaf in leaves]).hex()
