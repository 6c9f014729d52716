"""Saved cards: a buyer saves a card before a sale (Stripe's SetupIntent, confirmed by Stripe.js on
/cards/) and, once holding a unit, pays with it in one press.

The card's number goes from the buyer's browser to Stripe; the shop keeps the provider's id of the
card (a PaymentMethod) and what the buyer recognises it by (brand, last four, expiry). A card is
always looked up with its buyer, so another buyer's card is unknown (404), never charged. One press
is start_payment (the same saga, the same intent per payment) and a confirm with the saved card:
authorised, the webhook confirms the order as for any card; a 3-D Secure challenge goes on on our
pay page; a decline leaves the attempt to fail and the buyer to pay with the normal form.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils.translation import gettext_lazy

from checkout import services
from checkout.models import Order, Payment, PaymentCustomer, SavedCard
from checkout.providers.base import PermanentProviderError, ProviderError
from checkout.providers.stripe import StripeProvider
from core.errors import FloodgateError, NotFound
from shop.models import Drop

log = logging.getLogger(__name__)

# Only Stripe saves cards; the simulator's buyers pay on its hosted page each time.
PROVIDER = "stripe"


class CardRefused(FloodgateError):
    code, status = "card_not_saved", 400


class CardsUnavailable(FloodgateError):
    code, status = "payment_unavailable", 503


@dataclass(frozen=True)
class Setup:
    setup_id: str
    client_secret: str


@dataclass(frozen=True)
class OnePress:
    payment: Payment
    order: Order
    outcome: str  # "authorised", "challenge" (3-D Secure on our pay page) or "declined"


def cards_of(*, buyer_id: int) -> list[SavedCard]:
    return list(SavedCard.objects.filter(buyer_id=buyer_id, provider=PROVIDER))


def saves_cards(drop: Drop) -> bool:
    """Whether a drop's buyers can pay with a saved card (its provider is Stripe)."""
    return services.provider_for(drop) == PROVIDER


def card_for(*, buyer_id: int | None, drop: Drop) -> SavedCard | None:
    """The card the hold page offers for one press: the buyer's latest, when the drop pays by Stripe."""
    if buyer_id is None or not saves_cards(drop):
        return None
    return SavedCard.objects.filter(buyer_id=buyer_id, provider=PROVIDER).first()


def begin_setup(*, buyer_id: int) -> Setup:
    """A SetupIntent on the buyer's customer (made on first use) for the /cards/ page."""
    provider = StripeProvider()
    try:
        customer_id = _customer_of(provider, buyer_id=buyer_id)
        setup_id, secret = provider.create_setup(customer_id=customer_id, buyer_id=buyer_id)
    except ProviderError as error:
        log.warning("saving a card for buyer %s: %s", buyer_id, error)
        raise CardsUnavailable(gettext_lazy("Stripe is not answering; try again in a moment.")) from None
    return Setup(setup_id=setup_id, client_secret=secret)


def save_card(*, buyer_id: int, setup_id: str) -> SavedCard:
    """Record the card of a SetupIntent that succeeded, if it is this buyer's (its customer and its
    metadata say so: a setup id is no secret); saving it twice gives the same card."""
    provider = StripeProvider()
    customer = PaymentCustomer.objects.filter(buyer_id=buyer_id, provider=PROVIDER).first()
    try:
        setup = provider.finished_setup(setup_id)
    except PermanentProviderError:
        raise NotFound(gettext_lazy("There is no such card setup among yours.")) from None
    except ProviderError:
        raise CardsUnavailable(gettext_lazy("Stripe is not answering; try again in a moment.")) from None
    metadata = setup.get("metadata") or {}
    if (
        customer is None
        or setup.get("customer") != customer.customer_id
        or metadata.get("buyer") != str(buyer_id)
    ):
        raise NotFound(gettext_lazy("There is no such card setup among yours."))
    method = setup.get("payment_method")
    if setup.get("status") != "succeeded" or not isinstance(method, str):
        raise CardRefused(gettext_lazy("This card was not saved: your bank did not confirm it."))
    try:
        card = provider.attach_card(payment_method_id=method, customer_id=customer.customer_id)
    except PermanentProviderError:
        raise CardRefused(gettext_lazy("This card was not saved: your bank did not confirm it.")) from None
    except ProviderError:
        raise CardsUnavailable(gettext_lazy("Stripe is not answering; try again in a moment.")) from None
    saved, _ = SavedCard.objects.get_or_create(
        provider=PROVIDER,
        payment_method_id=method,
        defaults={
            "buyer_id": buyer_id,
            "brand": str(card.get("brand") or "")[:40],
            "last4": str(card.get("last4") or "")[:4],
            "exp_month": int(card.get("exp_month") or 0),
            "exp_year": int(card.get("exp_year") or 0),
        },
    )
    return saved


def remove_card(*, buyer_id: int, card_id: int) -> None:
    """Detach the card at Stripe, then forget it: a card we no longer list can no longer be charged."""
    card = _card_of(buyer_id=buyer_id, card_id=card_id)
    try:
        StripeProvider().detach_card(payment_method_id=card.payment_method_id)
    except PermanentProviderError as error:
        # Detached already (or gone at Stripe): nothing of it is left to charge.
        log.info("saved card %s: detach refused (%s); forgotten", card.pk, error)
    except ProviderError:
        raise CardsUnavailable(gettext_lazy("Stripe is not answering; try again in a moment.")) from None
    card.delete()


def forget_cards(*, buyer_id: int) -> list[str]:
    """Delete the buyer's saved cards and provider customer (their erasure, in its transaction);
    returns the payment method ids for detach_all to detach once that commits."""
    methods = list(SavedCard.objects.filter(buyer_id=buyer_id).values_list("payment_method_id", flat=True))
    SavedCard.objects.filter(buyer_id=buyer_id).delete()
    PaymentCustomer.objects.filter(buyer_id=buyer_id).delete()
    return methods


def detach_all(payment_method_ids: list[str]) -> None:
    """Detach cards at Stripe, best effort: they are forgotten here already, so no one press can
    charge them; one Stripe refuses or cannot be reached for is logged for a person to detach."""
    provider = StripeProvider()
    for method in payment_method_ids:
        try:
            provider.detach_card(payment_method_id=method)
        except ProviderError as error:
            log.error(
                "erasure: card %s not detached at Stripe (%s); detach it in Stripe's dashboard", method, error
            )


def pay_with_saved_card(*, hold_id: int, buyer_id: int, card_id: int) -> OnePress:
    """One press: start the payment (the hold's one extension, the order, one intent) and confirm the
    intent with the buyer's saved card."""
    card = _card_of(buyer_id=buyer_id, card_id=card_id)  # before anything moves: a stranger's is 404
    customer = PaymentCustomer.objects.filter(buyer_id=buyer_id, provider=PROVIDER).first()
    if customer is None:  # a card is saved on a customer: none, no card of theirs
        raise NotFound(gettext_lazy("There is no such card among yours."))
    started = services.start_payment(hold_id=hold_id, buyer_id=buyer_id)
    if started.payment.provider != PROVIDER:
        raise CardRefused(gettext_lazy("This drop is not paid by card here; use the payment page."))
    try:
        confirmed = StripeProvider().confirm_saved(
            str(started.payment.session_id),
            payment_method_id=card.payment_method_id,
            customer_id=customer.customer_id,
        )
    except PermanentProviderError as error:
        # An intent past confirming (paid already in another tab, or declined): the pay page says which.
        log.info("one press on payment %s: %s", started.payment.pk, error)
        return OnePress(started.payment, started.order, "challenge")
    except ProviderError:
        raise CardsUnavailable(gettext_lazy("Stripe is not answering; try again in a moment.")) from None
    outcome = "declined" if confirmed.declined else "challenge" if confirmed.challenge else "authorised"
    return OnePress(started.payment, started.order, outcome)


def _card_of(*, buyer_id: int, card_id: int) -> SavedCard:
    card = SavedCard.objects.filter(pk=card_id, buyer_id=buyer_id, provider=PROVIDER).first()
    if card is None:
        raise NotFound(gettext_lazy("There is no such card among yours."))
    return card


def _customer_of(provider: StripeProvider, *, buyer_id: int) -> str:
    found = PaymentCustomer.objects.filter(buyer_id=buyer_id, provider=PROVIDER).first()
    if found is not None:
        return found.customer_id
    customer_id = provider.create_customer(buyer_id=buyer_id)
    try:
        with transaction.atomic():
            PaymentCustomer.objects.create(buyer_id=buyer_id, provider=PROVIDER, customer_id=customer_id)
    except IntegrityError:  # another tab made one meanwhile: keep that one
        return PaymentCustomer.objects.get(buyer_id=buyer_id, provider=PROVIDER).customer_id
    return customer_id
