"""What every layer's answer models share, and the error answer every door gives.

Each layer declares the answers it builds in its own `answers.py` (holds the hold, admission the
place in line, checkout the order...) and builds them as those models, so the Django views, the
edge and the claim lane serialise the same types; config/schemas.py gathers them and
config/api.py publishes the schema of them.

Answers are closed objects (extra="forbid": additionalProperties false). A field without a default
is one the answer always carries (required); an Omittable one is left out unless it is given; a
`| None` one may be null.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PlainSerializer, WithJsonSchema
from pydantic.json_schema import SkipJsonSchema

from core.errors import FloodgateError

T = TypeVar("T")
# A field an answer may leave out, typed honestly: None is its default, not a value the schema allows.
if TYPE_CHECKING:  # mypy cannot read SkipJsonSchema[None] as a type; to it, this is Optional
    Omittable: TypeAlias = T | None
else:
    Omittable = T | SkipJsonSchema[None]
# A time as datetime.isoformat writes it ("+00:00", not pydantic's "Z"): the wire format the API has
# always had, so no client comparing strings sees a change.
Moment = Annotated[
    datetime,
    PlainSerializer(datetime.isoformat, return_type=str, when_used="json"),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
Slug = Annotated[str, Field(description="The drop's slug")]
Quantity = Annotated[int, Field(ge=1)]


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def dump(self) -> dict[str, Any]:
        """The answer as JSON values: a field left out stays out, one given as None is null."""
        return self.model_dump(mode="json", exclude_unset=True)

    def dump_json(self) -> bytes:
        """The same as a body, encoded in one step (the edge's and the lane's answers)."""
        return self.model_dump_json(exclude_unset=True).encode()


class Error(Closed):
    error: str = Field(description="A stable code, e.g. sold_out")
    detail: str = Field(
        description="What to do, for a person, in the request's language (Accept-Language; default English)"
    )
    remaining: Omittable[NonNegativeInt] = Field(None, description="sold_out: how many are left to ask for")
    hold: int | None = Field(
        None, description="hold_exists: the buyer's active hold (null: one is being made)"
    )
    queue: Omittable[Literal[True]] = Field(None, description="not_admitted: go through the waiting room")
    starts_at: Omittable[Moment] = Field(None, description="not_started: when the drop opens")
    challenge: Omittable[str] = Field(None, description="proof_of_work_required: what to solve")
    bits: Omittable[NonNegativeInt] = Field(
        None, description="proof_of_work_required: leading zero bits asked"
    )
    expires_at: Omittable[Moment] = Field(
        None, description="proof_of_work_required: the challenge is refused after this"
    )
    opens_at: Omittable[Moment] = Field(None, description="room_not_open: when challenges are issued")
    closed_at: Omittable[Moment] = Field(None, description="entries_closed: when the raffle's entries closed")
    fields: Omittable[dict[str, str]] = Field(
        None, description="invalid_address: what is wrong, field by field"
    )
    variant: Omittable[str] = Field(None, description="variant_sold_out: the variant asked for")
    left: Omittable[list[str]] = Field(None, description="variant_sold_out: the variants still on sale")
    variants: Omittable[list[str]] = Field(None, description="invalid_variant: the drop's variants")


def error_body(error: FloodgateError) -> dict[str, Any]:
    """The JSON every door answers an error with: Django's views (core.api), the edge, the lane.
    The detail is read in the active language (the request's: LocaleMiddleware, or the edge's and
    the lane's override)."""
    return Error(error=error.code, detail=str(error.detail), **error.extra).dump()
