"""Every answer of `/api/`, gathered: the calls (config/api.py) publish their schema from these.

Each layer declares the answers it builds in its own answers.py (core: the error; catalogue: the
drop; holds: the hold and the invariant; admission: the place in line and the draw; checkout: the
order; ops: the kill switch) and serialises through them, Django's views, the edge and the claim
lane alike (core/answers.py says how a model becomes JSON). This module adds the API's own pages.
"""

from __future__ import annotations

from typing import Any, Literal

from admission.answers import Draw, Offer, OfferState, Place, QueueState, RaffleResult
from catalogue.answers import Drop, DropList, Me, VariantOnSale
from checkout.answers import (
    DropReminder,
    ExchangeBody,
    ExchangeListing,
    Order,
    OrderExchange,
    OrderList,
    PaymentStarted,
    PushSubscribed,
    PushSubscriptionBody,
    Refund,
    RefundBody,
)
from core.answers import Closed, Error
from fairness.answers import Inclusion
from fairness.answers import Report as PublicReport
from holds.answers import Hold, HoldOrder, Invariant, ReserveBody, VariantBody, VariantInvariant
from ops.answers import PauseBody, Paused, Resumed
from shop.answers import AddressBody, ShippingAddress

__all__ = [
    "AddressBody",
    "Document",
    "Draw",
    "Drop",
    "DropList",
    "DropReminder",
    "Error",
    "ExchangeBody",
    "ExchangeListing",
    "Hold",
    "HoldOrder",
    "Inclusion",
    "Invariant",
    "Links",
    "Me",
    "Offer",
    "OfferState",
    "Order",
    "OrderExchange",
    "OrderList",
    "PauseBody",
    "Paused",
    "PaymentStarted",
    "Place",
    "PublicReport",
    "PushSubscribed",
    "PushSubscriptionBody",
    "QueueState",
    "RaffleResult",
    "Refund",
    "RefundBody",
    "ReserveBody",
    "Resumed",
    "ShippingAddress",
    "VariantBody",
    "VariantInvariant",
    "VariantOnSale",
]


class Links(Closed):
    openapi: str
    drops: str
    catalogue: str


class Document(Closed):
    openapi: Literal["3.1.0"]
    info: dict[str, Any]
    components: dict[str, Any]
    paths: dict[str, Any]
