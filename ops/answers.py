"""On-call's answers: the kill switch's result (ops.api), and what pausing asks."""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.answers import Closed
from shop.models import DropState


class Resumed(Closed):
    state: DropState
    changed: bool


class Paused(Resumed):
    drained: bool


# A request body is an open object (a field the view does not read is ignored), inlined in the operation.
class PauseBody(BaseModel):
    reason: str = Field(min_length=1)
