"""Every answer of `/api/` as a typed model: config/openapi.py generates the published schema from these.

Answers are closed objects (extra="forbid": additionalProperties false) and a field without a
default is one the answer always carries (required); an Omittable one may be left out, a `| None`
one may be null. The states are the models' own TextChoices, so a state added there is in the
schema too.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveInt
from pydantic.json_schema import SkipJsonSchema

from admission.services import OfferState
from admission.state import QueueState
from checkout.models import OrderState, PaymentState, RefundState
from holds.models import HoldState
from shop.models import DropState

T = TypeVar("T")
# A field an answer may leave out, typed honestly: None is its default, not a value the schema allows.
if TYPE_CHECKING:  # mypy cannot read SkipJsonSchema[None] as a type; to it, this is Optional
    Omittable: TypeAlias = T | None
else:
    Omittable = T | SkipJsonSchema[None]
Slug = Annotated[str, Field(description="The drop's slug")]
Quantity = Annotated[int, Field(ge=1)]


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Error(Closed):
    error: str = Field(description="A stable code, e.g. sold_out")
    detail: str = Field(description="What to do, for a person")
    remaining: Omittable[NonNegativeInt] = Field(None, description="sold_out: how many are left to ask for")
    hold: int | None = Field(
        None, description="hold_exists: the buyer's active hold (null: one is being made)"
    )
    queue: Omittable[Literal[True]] = Field(None, description="not_admitted: go through the waiting room")
    starts_at: Omittable[datetime] = Field(None, description="not_started: when the drop opens")
    challenge: Omittable[str] = Field(None, description="proof_of_work_required: what to solve")
    bits: Omittable[NonNegativeInt] = Field(
        None, description="proof_of_work_required: leading zero bits asked"
    )
    expires_at: Omittable[datetime] = Field(
        None, description="proof_of_work_required: the challenge is refused after this"
    )
    opens_at: Omittable[datetime] = Field(None, description="room_not_open: when challenges are issued")
    fields: Omittable[dict[str, str]] = Field(
        None, description="invalid_address: what is wrong, field by field"
    )
    variant: Omittable[str] = Field(None, description="variant_sold_out: the variant asked for")
    left: Omittable[list[str]] = Field(None, description="variant_sold_out: the variants still on sale")
    variants: Omittable[list[str]] = Field(None, description="invalid_variant: the drop's variants")


class VariantOnSale(Closed):
    name: str = Field(description='What to send as "variant"; "" for a drop of one unnamed variant')
    price_minor: NonNegativeInt
    remaining: NonNegativeInt
    sold_out: bool


class Drop(Closed):
    slug: str
    title: str
    state: DropState
    quantity: NonNegativeInt
    remaining: NonNegativeInt = Field(description="may be approximate")
    sold_out: bool
    starts_at: datetime
    ends_at: datetime
    waiting_room: bool
    price_minor: NonNegativeInt
    currency: str
    per_buyer_limit: Quantity
    variants: list[VariantOnSale] = Field(description="Its variants in order, each with its own stock")


class DropList(Closed):
    drops: list[Drop]


class HoldOrder(Closed):
    id: int
    state: OrderState


class Hold(Closed):
    id: int
    drop: Slug
    state: HoldState
    quantity: Quantity
    expires_at: datetime
    extended: bool = Field(description="Paying extends a hold once")
    units: list[str] = Field(description="Unit labels (seats); empty for identical units")
    variant: str = Field(description='The variant held; "" for a drop of one unnamed variant')
    order: HoldOrder | None = Field(description="The order once payment has started")


class Order(Closed):
    id: int
    hold: int
    drop: Slug
    state: OrderState
    quantity: Quantity
    variant: str = Field(description='The variant bought; "" for a drop of one unnamed variant')
    amount_minor: NonNegativeInt = Field(description="The gross, tax included: what is charged")
    net_minor: NonNegativeInt = Field(description="amount_minor without the tax")
    tax_minor: NonNegativeInt = Field(description="The tax in amount_minor, rounded half-up on the order")
    tax_rate: str = Field(
        pattern=r"^\d{1,2}\.\d{2}$", description="The tax rate in percent when payment started, e.g. 19.00"
    )
    currency: str
    failure_reason: str = Field(description="Empty unless failed")
    refunded: bool = Field(description="An authorisation that came too late was voided")
    refunded_quantity: NonNegativeInt = Field(description="Units refunded (or being refunded)")
    refunded_minor: NonNegativeInt = Field(description="Money refunded (or being refunded), minor units")
    created_at: datetime


class Refund(Closed):
    id: int
    order: int
    state: RefundState = Field(description="requested: the provider has not answered yet (retried)")
    quantity: Quantity
    amount_minor: PositiveInt
    currency: str
    restock: bool = Field(description="The units went back on sale")
    reason: str
    created_at: datetime


class RefundBody(BaseModel):
    quantity: Omittable[Quantity] = Field(None, description="Default: every unit not refunded yet")
    amount_minor: Omittable[PositiveInt] = Field(None, description="Default: those units' share of the price")
    restock: bool = Field(False, description="Put the units back on sale")
    reason: str = Field("", max_length=300, description="Shown to the buyer")


class OrderList(Closed):
    orders: list[Order]


class PaymentStarted(Closed):
    payment: int
    state: PaymentState
    redirect_url: str = Field(description="Send the buyer here to pay")
    order: Order


class Offer(Closed):
    hold: int
    state: OfferState
    expires_at: datetime
    paying: bool


class Place(Closed):
    ticket: int | None = Field(description="Place in line; null until the draw")
    entry: int = Field(description="Entry number (the draw sorts these)")
    position: NonNegativeInt | None = Field(description="1 = next; 0 = in")
    admitted: bool
    admission_token: str | None = Field(
        description="Send as X-Admission-Token when reserving; short-lived: GET again"
    )
    eta_seconds: NonNegativeInt | None
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
    last_ticket: NonNegativeInt
    waiting: NonNegativeInt
    pace_per_minute: NonNegativeFloat
    seed_sha256: str | None
    seed: str | None = Field(description="Revealed after the draw")
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
    beacon_round_at: Omittable[datetime] = Field(None, description="When the chain publishes that round")
    entries_closed_at: Omittable[datetime] = Field(None, description="When the entry list closed")
    seed: Omittable[str] = None
    drawn_at: Omittable[datetime] = None
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


class VariantInvariant(Closed):
    name: str
    quantity: NonNegativeInt
    available: NonNegativeInt
    held: NonNegativeInt
    sold: NonNegativeInt
    refunded: NonNegativeInt
    drift: int


class Invariant(Closed):
    quantity: NonNegativeInt
    available: NonNegativeInt
    held: NonNegativeInt
    sold: NonNegativeInt
    refunded: NonNegativeInt = Field(description="Refunded units kept off sale (put back: available)")
    expired_unreclaimed: NonNegativeInt
    expired_holds: NonNegativeInt
    drift: int = Field(description="quantity - (available + held + sold + refunded); 0")
    variants: Omittable[list[VariantInvariant]] = Field(
        None, description="GET /api/ops/drops/<slug>/invariant: the same per variant, in order"
    )


class Resumed(Closed):
    state: DropState
    changed: bool


class Paused(Resumed):
    drained: bool


class DropReminder(Closed):
    drop: Slug
    reminded: bool = Field(description="An e-mail goes (or went) to you when the drop opens")
    sent_at: datetime | None = Field(
        description="When the reminder was written to the outbox; null until then"
    )
    starts_at: datetime
    sends_at: datetime = Field(
        description="When the e-mail goes: the start, or for a waiting room its opening (an hour before)"
    )
    calendar: str = Field(description="The drop's start as an iCalendar file (text/calendar), for anyone")


class Me(Closed):
    username: str


class Links(Closed):
    openapi: str
    drops: str
    catalogue: str


class Document(Closed):
    openapi: Literal["3.1.0"]
    info: dict[str, Any]
    components: dict[str, Any]
    paths: dict[str, Any]


# Request bodies: open objects (a field the view does not read is ignored), inlined in the operation.
class ShippingAddress(Closed):
    id: int
    name: str
    line1: str
    line2: str
    postal_code: str
    city: str
    region: str
    country: str = Field(description="ISO 3166-1 alpha-2, e.g. DE")
    phone: str


class AddressBody(BaseModel):
    name: str = Field(max_length=100)
    line1: str = Field(max_length=100, description="Street and number")
    line2: Omittable[str] = Field(None, max_length=100)
    postal_code: str = Field(max_length=20)
    city: str = Field(max_length=60)
    region: Omittable[str] = Field(None, max_length=60)
    country: str = Field(pattern="^[A-Z]{2}$", description="ISO 3166-1 alpha-2, e.g. DE")
    phone: Omittable[str] = Field(None, max_length=30)


class ReserveBody(BaseModel):
    quantity: Quantity
    unit: Omittable[str] = None
    variant: Omittable[str] = Field(
        None, description="The variant's name; required where the drop has several"
    )


class PauseBody(BaseModel):
    reason: str = Field(min_length=1)
