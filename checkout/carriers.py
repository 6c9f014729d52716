"""The carriers a parcel leaves with, and where a buyer follows it."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from checkout.models import Order


@dataclass(frozen=True)
class Carrier:
    name: str | Promise
    tracking_url: str  # "{number}" is replaced; "" when the carrier has no public tracking page


# Codes as the CSV and the API spell them; the links are each carrier's public tracking page.
CARRIERS: dict[str, Carrier] = {
    "dhl": Carrier("DHL", "https://www.dhl.com/global-en/home/tracking.html?tracking-id={number}"),
    "dpd": Carrier("DPD", "https://tracking.dpd.de/status/en_US/parcel/{number}"),
    "gls": Carrier("GLS", "https://gls-group.com/track/{number}"),
    "hermes": Carrier(
        "Hermes", "https://www.myhermes.de/empfangen/sendungsverfolgung/sendungsinformation#{number}"
    ),
    "ups": Carrier("UPS", "https://www.ups.com/track?tracknum={number}"),
    "fedex": Carrier("FedEx", "https://www.fedex.com/fedextrack/?trknbr={number}"),
    "usps": Carrier("USPS", "https://tools.usps.com/go/TrackConfirmAction?tLabels={number}"),
    "royal_mail": Carrier(
        "Royal Mail", "https://www.royalmail.com/track-your-item#/tracking-results/{number}"
    ),
    "other": Carrier(_("another carrier"), ""),
}


def carrier_name(code: str) -> str:
    known = CARRIERS.get(code)
    return str(known.name) if known else code


def tracking_url(order: Order) -> str:
    """The carrier's public page for the parcel ("" before it ships or for an unknown carrier)."""
    known = CARRIERS.get(order.carrier)
    if not order.shipped_at or known is None or not known.tracking_url:
        return ""
    return known.tracking_url.format(number=quote(order.tracking_number, safe=""))
