"""The waiting room's answers: a buyer's place in line (Django's queue API and the edge's polls both
build it with admission.state.place_answer), a returned unit offered to it, and the published draw."""

from __future__ import annotations

from typing import Any, Literal

from django.db import models
from pydantic import ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt

from core.answers import Closed, Moment, Omittable
from shop.models import DropFormat


class QueueState(models.TextChoices):
    """What a waiting buyer is told of the line (the API's Place.state)."""

    SCHEDULED = "scheduled"
    ADMITTING = "admitting"
    ALL_HELD = "all_held"  # nothing left to admit, but held units may come back
    SOLD_OUT = "sold_out"
    PAUSED = "paused"
    CLOSED = "closed"


class OfferState(models.TextChoices):
    """An offer as its ticket's buyer sees it: still theirs, paid for, or gone to the next ticket."""

    HELD = "held"
    SOLD = "sold"
    LAPSED = "lapsed"


class RaffleResult(models.TextChoices):
    """A raffle entry's outcome as its buyer is told it (the API's Place.result)."""

    WON = "won"  # a unit is held for you (the place's offer): pay before it expires
    RESERVE = "reserve"  # ranked behind the winners: an unpaid or released win may pass to you
    LOST = "lost"  # your win lapsed, or no unit can reach you any more


class Offer(Closed):
    hold: int
    state: OfferState
    expires_at: Moment
    paying: bool
    variant: str | None = Field(
        default=None, description="The size of the unit that came back (null for a drop of one variant)"
    )


class Place(Closed):
    ticket: int | None = Field(description="Place in line; null until the draw")
    entry: int = Field(description="Entry number (the draw sorts these)")
    position: NonNegativeInt | None = Field(description="1 = next; 0 = in")
    admitted: bool
    admission_token: str | None = Field(
        description="Send as X-Admission-Token when reserving; short-lived: GET again"
    )
    eta_seconds: NonNegativeInt | None
    eta_low_seconds: PositiveInt | None = Field(
        default=None,
        description="The wait's likely range at the line's measured pace (10th to 90th percentile); "
        "null when in, not numbered yet, or when the line has not moved in the last two minutes",
    )
    eta_high_seconds: PositiveInt | None = Field(default=None, description="The range's upper end")
    drawn: bool
    unlikely: bool = Field(description="As many ahead as units left and held, or more: unlikely to get one")
    admitted_through: NonNegativeInt
    state: QueueState
    remaining: NonNegativeInt
    returning: NonNegativeInt = Field(description="Units given back, being offered to the next tickets")
    held: NonNegativeInt
    admitted_unclaimed: NonNegativeInt = Field(
        description="Admitted tickets whose buyer has had no unit yet: ahead of everyone waiting"
    )
    offered_through: NonNegativeInt = Field(
        description="Tickets up to this one have been offered a returned unit (or had one)"
    )
    offer: Offer | None = Field(
        description="A returned unit held for you: pay for its hold before expires_at, or it goes to "
        "the next ticket (state lapsed)"
    )
    format: DropFormat = Field(description="waiting_room, or raffle (entries drawn at the close)")
    result: RaffleResult | None = Field(
        description="A raffle's entry after the draw: won (the offer is your hold: pay before its "
        "expires_at), reserve (an unpaid or released win may pass to you, by rank), lost; null "
        "before the draw and for a waiting room"
    )
    rank: PositiveInt | None = Field(description="A raffle's entry: its place in the published ranking")
    last_ticket: NonNegativeInt
    waiting: NonNegativeInt
    pace_per_minute: NonNegativeFloat
    seed_sha256: str | None
    seed: str | None = Field(description="Revealed after the draw")
    entries_sha256: str | None = Field(
        description="After the draw: the closed entry list's hash; with seed and beacon, an entry's draw "
        "key is sha256('<seed>:<entries_sha256>:<beacon>:<entry>')"
    )
    beacon: str | None = Field(description="After the draw: the beacon value mixed in ('' if none)")
    admitted_entry: PositiveInt | None = Field(
        description="After the draw: the drawn entry with the highest number inside admitted_through; an "
        "entry whose draw key sorts at or before its key is admitted"
    )
    unlikely_entry: PositiveInt | None = Field(
        description="After the draw: the drawn entry numbered unlikely_from; an entry whose draw key sorts "
        "at or after its key is unlikely to get a unit (null: no drawn entry is)"
    )
    unlikely_from: PositiveInt | None = Field(description="unlikely_entry's ticket number")
    queue_ticket: str | None = Field(
        description="Send back as X-Queue-Ticket on GET (the page's cookie carries it): the edge "
        "answers that poll from its snapshot"
    )


DRAWN_ONLY = ["seed", "drawn_at", "entries", "beacon", "beacon_signature", "beacon_previous_signature"]
DRAWN_ONLY += ["beacon_note", "order", "rule"]


def _drawn_only(schema: dict[str, Any]) -> None:
    """The seed, the entries and the round's value come with the draw, never before it: all or none."""
    schema["if"] = {"properties": {"drawn": {"const": True}}}
    schema["then"] = {"required": [*DRAWN_ONLY, "entries_sha256", "entries_closed_at"]}
    schema["else"] = {"not": {"anyOf": [{"required": [name]} for name in DRAWN_ONLY]}}


class Draw(Closed):
    model_config = ConfigDict(json_schema_extra=_drawn_only)

    seed_sha256: str
    drawn: bool
    beacon_status: Literal["none", "waiting", "verified", "unreachable"] = Field(
        description="none: no beacon named; waiting: the round is named, not read yet; verified: read "
        "and its signature checked; unreachable: not read, the order rests on the committed seed alone"
    )
    beacon_chain: Omittable[str] = Field(
        None, description="The drand chain's hash, named at the queue's creation"
    )
    beacon_chain_name: Omittable[str] = Field(None, description="quicknet or mainnet (League of Entropy)")
    beacon_scheme: Omittable[str] = Field(None, description="The chain's signature scheme")
    beacon_public_key: Omittable[str] = Field(None, description="The chain's public key (hex)")
    beacon_round: Omittable[NonNegativeInt] = Field(
        None, description="The round named before the first join; its time is after the list closes"
    )
    beacon_round_at: Omittable[Moment] = Field(None, description="When the chain publishes that round")
    entries_closed_at: Omittable[Moment] = Field(None, description="When the entry list closed")
    seed: Omittable[str] = None
    drawn_at: Omittable[Moment] = None
    entries: Omittable[list[int]] = Field(None, description="The closed entry list, ascending")
    entries_sha256: Omittable[str] = Field(
        None, description="SHA-256 of the entries, ascending, joined by ','; published at the close"
    )
    beacon: Omittable[str] = Field(
        None, description="The randomness mixed in: sha256 of the round's signature ('' if none or not read)"
    )
    beacon_signature: Omittable[str] = Field(None, description="The round's BLS signature ('' if not read)")
    beacon_previous_signature: Omittable[str] = Field(
        None, description="Chained schemes (mainnet): the previous round's signature"
    )
    beacon_note: Omittable[str] = Field(None, description="Why the round was not used ('' if it was)")
    order: Omittable[list[int]] = Field(
        None, description="The entries by the ticket numbers they hold (the first has ticket 1)"
    )
    rule: Omittable[str] = None
    unsteerable: bool = Field(
        False,
        description="True only once drawn with a verified drand round: then nobody, the shop included, "
        "could choose the order. False before the draw and for a draw on the seed alone",
    )
    trust: str = Field("", description="What a buyer must trust about this draw, in words (translated)")
