"""The public report's answers: the figures, the committed outcomes, and one entry's inclusion proof."""

from __future__ import annotations

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from core.answers import Closed, Moment

RULE = (
    "Each leaf is an outcome line 'entry=..;place=..;admitted=..;offered=..;expired=..;bought=..;"
    "refunded=..;banned=..', in entry order. The tree is RFC 9162's: a leaf's hash is "
    "sha256(0x00 || leaf), a node's sha256(0x01 || left || right), and a tree of n leaves splits at "
    "the largest power of two below n."
)


class Units(Closed):
    quantity: NonNegativeInt
    sold: NonNegativeInt = Field(description="Units sold and not refunded")
    refunded: NonNegativeInt = Field(description="Units refunded")
    restocked: NonNegativeInt = Field(description="Of the refunded units, those put back on sale")
    left: NonNegativeInt = Field(description="Units never sold")


class Door(Closed):
    proof_failed: NonNegativeInt = Field(description="Joins whose proof of work did not solve its challenge")
    rate_limited: NonNegativeInt = Field(description="Answers 429 on this drop's pages and API")
    busy: NonNegativeInt = Field(description="Answers 503 (busy, try again in a moment)")
    server_error: NonNegativeInt = Field(description="Other 5xx answers")
    banned: NonNegativeInt = Field(description="Entries whose account was deactivated (skipped by the line)")
    accounts_merged: NonNegativeInt = Field(description="Always 0: one account holds at most one entry")


class Offered(Closed):
    entry: PositiveInt
    place: PositiveInt | None
    at: Moment = Field(description="When the offer was made")


class DrawSummary(Closed):
    drawn: bool
    seed: str | None
    seed_sha256: str | None
    entries_sha256: str | None
    beacon_round: NonNegativeInt | None
    beacon_status: str | None
    verified: bool = Field(description="The draw adds up and rests on a drand round that verifies")
    problems: list[str]


class Mark(Closed):
    at: Moment
    admitted_through: PositiveInt


class Admissions(Closed):
    admitted_through: NonNegativeInt
    waves: list[Mark] = Field(description="Each time the admitted-through mark moved forward")


class Waits(Closed):
    admitted: NonNegativeInt
    p50_seconds: NonNegativeFloat | None = Field(
        description="From joining (or the start, for early joiners) to being let in"
    )
    p99_seconds: NonNegativeFloat | None


class Exchange(Closed):
    closed_at: Moment = Field(description="When the face-value exchange closed")
    fee_minor: NonNegativeInt = Field(
        description="The shop's fee per unit resold, kept from the seller's refund"
    )
    listed: NonNegativeInt = Field(description="Units buyers put back at the price they paid")
    resold: NonNegativeInt = Field(description="Of those, units the next buyers in line paid for")
    kept: NonNegativeInt = Field(description="Units nobody took before the close: their sellers kept them")
    withdrawn: NonNegativeInt = Field(
        description="Units their sellers took back before anyone was offered them"
    )
    fees_minor: NonNegativeInt = Field(description="The fees kept on the units resold")


class Figures(Closed):
    drop: str
    units: Units
    holds_expired: NonNegativeInt
    offers: list[Offered] = Field(
        description="Returned units (and units on the exchange) offered, in the order they were offered"
    )
    offers_in_line_order: bool
    door: Door
    counted: str = Field(description="How the door's counts were kept")
    entries: NonNegativeInt
    draw: DrawSummary | None
    admissions: Admissions | None
    waits: Waits | None
    exchange: Exchange | None = Field(None, description="null: the drop had no face-value exchange")


class Report(Closed):
    drop: str
    published_at: Moment
    note: str = Field(description="The merchant's words; the figures cannot be edited")
    root: str = Field(description="Merkle root (hex) over the leaves")
    size: NonNegativeInt
    rule: str
    figures: Figures
    leaves: list[str]


class Inclusion(Closed):
    entry: PositiveInt
    leaf: str
    index: NonNegativeInt
    size: PositiveInt
    proof: list[str] = Field(description="Sibling hashes (hex) from the leaf up")
    root: str
