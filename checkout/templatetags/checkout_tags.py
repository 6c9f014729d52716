"""Checkout's parts of pages rendered by layers below it (the hold page is sale's): a template tag,
so the arrow still points down in Python."""

from __future__ import annotations

from django import template

from checkout import cards, vapid
from checkout.models import SavedCard
from shop.models import Drop

register = template.Library()


@register.simple_tag(takes_context=True)
def one_press_card(context: template.Context, drop: Drop) -> SavedCard | None:
    """The signed-in buyer's saved card the hold page offers for one press, if the drop pays by Stripe."""
    user = context["request"].user
    return cards.card_for(buyer_id=user.pk if user.is_authenticated else None, drop=drop)


@register.inclusion_tag("checkout/_save_card_link.html", takes_context=True)
def save_card_link(context: template.Context, drop: Drop) -> dict[str, object]:
    """Before the start (drop page, waiting room): "save a card now, pay in one press later"."""
    user = context["request"].user
    shown = user.is_authenticated and cards.saves_cards(drop)
    return {"shown": shown, "saved": shown and bool(cards.cards_of(buyer_id=user.pk))}


@register.inclusion_tag("checkout/_push_optin.html", takes_context=True)
def push_optin(context: template.Context) -> dict[str, object]:
    """The waiting room's "Tell me on this device when it is my turn" (Web Push), when the shop sends
    pushes and the buyer is signed in; the script shows it only where the browser can take one."""
    user = context["request"].user
    shown = user.is_authenticated and vapid.enabled()
    return {"shown": shown, "key": vapid.public_key() if shown else ""}
