"""A buyer's data: all of it as JSON on request, and erasure of the person.

Erasure anonymises the person and keeps the sale: the account stays (holds, orders and tickets
point at it, and every count and the invariant are made of them) under a name that says nothing,
with no e-mail, password, token, language or login; addresses no order used are deleted, phone
numbers too; the addresses orders were shipped to stay with those orders for the retention the law
asks of a merchant's records (ORDER_RECORDS_RETENTION_DAYS, ten years by default), the only
personal data left. Deactivating the account is what refuses its sessions and tokens at every door
at once (accounts.services.on_user_saved tells every web process, edge and lane).
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from admission.models import Ticket
from checkout import cards
from checkout.models import Order, OutboxMessage, PushSubscription, Refund, Reminder, SavedCard
from core.errors import NotFound, fill
from holds.models import Hold, PresaleListEntry
from shop.models import Address, ApiToken, BuyerLanguage

ERASED_PREFIX = "erased-"


def _when(moment: Any) -> str | None:
    return moment.isoformat() if moment is not None else None


def export(*, user_id: int) -> dict[str, object]:
    """Everything the shop keeps about the buyer, as they may download it (GDPR art. 15 and 20)."""
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        raise NotFound(fill(_("There is no buyer %(number)s."), number=user_id))
    language = BuyerLanguage.objects.filter(user_id=user_id).values_list("language", flat=True).first()
    token = ApiToken.objects.filter(user_id=user_id).first()
    return {
        "exported_at": timezone.now().isoformat(),
        "account": {
            "username": user.get_username(),
            "email": user.email,
            "first_name": user.first_name,
            "last_name": user.last_name,
            "joined": _when(user.date_joined),
            "last_login": _when(user.last_login),
            "language": language,
            "email_addresses": [
                {"email": e.email, "verified": e.verified, "primary": e.primary}
                for e in EmailAddress.objects.filter(user_id=user_id).order_by("pk")
            ],
            "api_token_created": _when(token.created_at) if token else None,  # never the token
        },
        "addresses": [
            {
                "name": a.name,
                "line1": a.line1,
                "line2": a.line2,
                "postal_code": a.postal_code,
                "city": a.city,
                "region": a.region,
                "country": a.country,
                "phone": a.phone,
                "given": _when(a.created_at),
            }
            for a in Address.objects.filter(user_id=user_id).order_by("pk")
        ],
        "holds": [
            {
                "id": h.pk,
                "drop": h.drop.slug,
                "variant": h.variant.name if h.variant else "",
                "quantity": h.quantity,
                "state": h.state,
                "made": _when(h.created_at),
            }
            for h in Hold.objects.filter(buyer_id=user_id).select_related("drop", "variant").order_by("pk")
        ],
        "orders": [
            {
                "id": o.pk,
                "drop": o.drop.slug,
                "quantity": o.quantity,
                "amount_minor": o.amount_minor,
                "currency": o.currency,
                "state": o.state,
                "shipping_address": str(o.shipping_address or ""),
                "shipped": _when(o.shipped_at),
                "tracking_number": o.tracking_number,
                "made": _when(o.created_at),
            }
            for o in Order.objects.filter(buyer_id=user_id)
            .select_related("drop", "shipping_address")
            .order_by("pk")
        ],
        "refunds": [
            {
                "order": r.order_id,
                "amount_minor": r.amount_minor,
                "state": r.state,
                "made": _when(r.created_at),
            }
            for r in Refund.objects.filter(order__buyer_id=user_id).order_by("pk")
        ],
        "queue_tickets": [
            {"drop": t.drop.slug, "number": t.number, "joined": _when(t.joined_at)}
            for t in Ticket.objects.filter(buyer_id=user_id).select_related("drop").order_by("pk")
        ],
        "saved_cards": [  # what the buyer recognises a card by; its number never reached the shop
            {
                "brand": c.brand,
                "last4": c.last4,
                "expires": f"{c.exp_month:02d}/{c.exp_year}",
                "saved": _when(c.created_at),
            }
            for c in SavedCard.objects.filter(buyer_id=user_id).order_by("pk")
        ],
        "reminders": [
            {"drop": r.drop.slug, "asked": _when(r.created_at), "sent": _when(r.sent_at)}
            for r in Reminder.objects.filter(buyer_id=user_id).select_related("drop").order_by("pk")
        ],
        "push_subscriptions": [  # the browsers that get the shop's pushes (their push service's host)
            {"service": urlsplit(p.endpoint).hostname, "subscribed": _when(p.created_at)}
            for p in PushSubscription.objects.filter(buyer_id=user_id).order_by("pk")
        ],
        "emails": [
            {"kind": m.topic, "written": _when(m.created_at), "sent": _when(m.sent_at)}
            for m in OutboxMessage.objects.filter(topic__endswith=".email", payload__buyer=user_id).order_by(
                "pk"
            )
        ],
    }


def erased(user: Any) -> bool:
    return str(user.get_username()).startswith(ERASED_PREFIX) and not user.is_active


def erase(*, user_id: int) -> None:
    """Anonymise the buyer (idempotent). Staff accounts are not buyers: refused (ValueError)."""
    with transaction.atomic(durable=True):
        user = get_user_model().objects.select_for_update().filter(pk=user_id).first()
        if user is None:
            raise NotFound(fill(_("There is no buyer %(number)s."), number=user_id))
        if user.is_staff or user.is_superuser:
            raise ValueError("a staff account is not a buyer; remove its staff status first")
        emails = {
            user.email.lower(),
            *(e.lower() for e in EmailAddress.objects.filter(user=user).values_list("email", flat=True)),
        }
        PresaleListEntry.objects.filter(email__in=[e for e in emails if e]).delete()
        EmailAddress.objects.filter(user=user).delete()
        ApiToken.objects.filter(user=user).delete()  # post_delete tells every process
        BuyerLanguage.objects.filter(user=user).delete()
        Reminder.objects.filter(buyer=user, sent_at__isnull=True).delete()
        PushSubscription.objects.filter(buyer=user).delete()
        # Saved cards go, and are detached at the provider once this commits (a network call: never
        # inside the transaction); the provider's customer is forgotten too.
        transaction.on_commit(partial(cards.detach_all, cards.forget_cards(buyer_id=user.pk)))
        used = Order.objects.filter(buyer=user, shipping_address__isnull=False).values("shipping_address")
        Address.objects.filter(user=user).exclude(pk__in=used).delete()
        Address.objects.filter(user=user).update(phone="")
        user.username = f"{ERASED_PREFIX}{user.pk}-{secrets.token_hex(4)}"
        user.email = ""
        user.first_name = user.last_name = ""
        user.set_unusable_password()
        user.is_active = False  # on_user_saved: every door forgets the buyer once this commits
        user.save()
        forget_expired_records(user_ids=[user.pk])


def forget_expired_records(*, user_ids: list[int] | None = None) -> int:
    """Blank the kept addresses of erased buyers once every order that used them is older than
    ORDER_RECORDS_RETENTION_DAYS (run daily: `manage.py forget_expired_records`). The country stays:
    alone it names nobody, and the tax of the order was decided by it."""
    cutoff = timezone.now() - timedelta(days=settings.ORDER_RECORDS_RETENTION_DAYS)
    erased_buyers = get_user_model().objects.filter(username__startswith=ERASED_PREFIX, is_active=False)
    if user_ids is not None:
        erased_buyers = erased_buyers.filter(pk__in=user_ids)
    recent = Order.objects.filter(created_at__gt=cutoff, shipping_address__isnull=False).values(
        "shipping_address"
    )
    expired = Address.objects.filter(user__in=erased_buyers).exclude(pk__in=recent).exclude(name="")
    return expired.update(name="", line1="", line2="", postal_code="", city="", region="", phone="")
