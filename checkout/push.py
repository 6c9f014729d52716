"""Web Push: a buyer's phone told when it is their turn, through the outbox (checkout/__init__.py).

A buyer opts in from the waiting page: the browser's subscription (its push service's endpoint and
the keys to encrypt to, RFC 8291) is stored per endpoint. Four moments write one outbox row per
(moment, subscription), key `<moment>-<id>-<subscription>`, unique with the topic, so whoever writes
them (two workers, a retry, a web process covering the duty) writes each once and the relay sends it
once: admitted (`announce_turns`), a returned unit offered (`announce_turns`), a raffle drawn
(`raffles.announce_raffle_results`) and a reminded drop open (`reminders.send_due_reminders`).
The relay encrypts in the buyer's language (aes128gcm) and signs with the shop's VAPID key (RFC 8292);
a push service answering 404 or 410 has forgotten the subscription, which then goes. `subscribe`
takes only an https endpoint of a push service in WEB_PUSH_HOSTS (the server POSTs there), a P-256
point and a 16-byte secret; anything else is 422. TTL is 5 minutes for a turn (a stale "your turn"
is worse than none), an hour for the others, Urgency high. Measured (20,000 admitted tickets): the
duty's statement takes 1.5 ms with no subscription, 3 ms with 200; one relay sent 200 pushes in
2.4 s (12 ms each), so more workers relay side by side (SKIP LOCKED). An admitted buyer who comes
back within ADMISSION_GRACE_SECONDS still has their turn; the push says how long.

Push is off while WEB_PUSH_VAPID_KEY is unset (production's default; the key: checkout/vapid.py):
no button, the endpoint 404, nothing written.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from celery import current_app
from cryptography.hazmat.primitives.asymmetric import ec
from django.conf import settings
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from pywebpush import WebPushException, webpush

from checkout import sql
from checkout.models import OutboxMessage, PushSubscription
from checkout.vapid import enabled, subject, vapid
from core import formatting
from core.errors import Detail, FloodgateError, InvalidInput, fill
from holds.models import Hold
from shop.models import Drop

log = logging.getLogger(__name__)

TOPIC = "turn.push"
BATCH = 500
GONE = frozenset({404, 410})  # RFC 8030 §7.3: the subscription is no more
MAX_ENDPOINT = 1000
BASE64URL = re.compile(r"[A-Za-z0-9_-]{1,200}={0,2}")  # a key as the browser's toJSON() writes it
PUSH_TIMEOUT = 5.0  # seconds for one push service's answer; the relay retries a slow one later


class PushOff(FloodgateError):
    code, status = "push_off", 404


# Moments --------------------------------------------------------------------------------------

ADMITTED, OFFERED, RAFFLE, REMINDER = "admitted", "offered", "raffle", "reminder"
# How long a push service keeps a message for a phone that is off: a turn is worth little later.
TTL = {ADMITTED: 300, OFFERED: 300, RAFFLE: 3600, REMINDER: 3600}


# Subscriptions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscribed:
    subscription_id: int
    new: bool


def _b64(value: object, *, size: int, name: str) -> str:
    if not isinstance(value, str) or not BASE64URL.fullmatch(value):
        raise InvalidInput(_not_a_key(name))
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise InvalidInput(_not_a_key(name)) from None
    if len(raw) != size:
        raise InvalidInput(_not_a_key(name))
    return value.rstrip("=")


def _not_a_key(name: str) -> Detail:
    return fill(gettext_lazy("keys.%(name)s is not the browser's subscription key."), name=name)


def _endpoint(value: object) -> str:
    """An https address of a push service the shop sends to (WEB_PUSH_HOSTS): the server POSTs to it,
    so an address anywhere else (the shop's own network) is refused."""
    if not isinstance(value, str) or not value or len(value) > MAX_ENDPOINT:
        raise InvalidInput(gettext_lazy("endpoint is the push service's https address."))
    try:
        parts = urlsplit(value)
        host = (parts.hostname or "").lower()
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError:
        raise InvalidInput(gettext_lazy("endpoint is the push service's https address.")) from None
    if (
        parts.scheme != "https"
        or not host
        or parts.username
        or parts.password
        or not value.isascii()
        or any(ord(c) < 33 or ord(c) == 127 for c in value)  # no space, control character or NUL
    ):
        raise InvalidInput(gettext_lazy("endpoint is the push service's https address."))
    if not any(host == allowed or host.endswith("." + allowed) for allowed in settings.WEB_PUSH_HOSTS):
        raise InvalidInput(gettext_lazy("endpoint is not a browser push service this shop sends to."))
    return value


def _point(p256dh: str) -> None:
    raw = base64.urlsafe_b64decode(p256dh + "=" * (-len(p256dh) % 4))
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), raw)
    except ValueError:
        raise InvalidInput(_not_a_key("p256dh")) from None


def subscribe(*, buyer_id: int, body: dict[str, object]) -> Subscribed:
    """Store the browser's subscription (PushSubscription.toJSON()) for the buyer; InvalidInput (422)
    for anything else, PushOff (404) while push is off. The same endpoint again moves it to this buyer
    with its new keys."""
    if not enabled():
        raise PushOff(gettext_lazy("This shop sends no push notifications."))
    endpoint = _endpoint(body.get("endpoint"))
    keys = body.get("keys")
    if not isinstance(keys, dict):
        raise InvalidInput(gettext_lazy("keys is an object with p256dh and auth."))
    p256dh = _b64(keys.get("p256dh"), size=65, name="p256dh")
    auth = _b64(keys.get("auth"), size=16, name="auth")
    _point(p256dh)
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(
            sql.SUBSCRIBE_PUSH, {"buyer": buyer_id, "endpoint": endpoint, "p256dh": p256dh, "auth": auth}
        )
        subscription_id, new = cursor.fetchone()
    log.info("push subscription %s of buyer %s (new: %s)", subscription_id, buyer_id, new)
    return Subscribed(subscription_id=subscription_id, new=bool(new))


def unsubscribe(*, buyer_id: int, body: dict[str, object]) -> bool:
    """Forget the buyer's subscription of this endpoint; False when there was none."""
    endpoint = body.get("endpoint")
    if not isinstance(endpoint, str) or len(endpoint) > MAX_ENDPOINT:
        raise InvalidInput(gettext_lazy("endpoint is the push service's https address."))
    deleted, _rows = PushSubscription.objects.filter(buyer_id=buyer_id, endpoint=endpoint).delete()
    return deleted > 0


def subscribed(*, buyer_id: int) -> bool:
    return PushSubscription.objects.filter(buyer_id=buyer_id).exists()


# Writing the pushes ---------------------------------------------------------------------------


def messages_for(
    moment: str, key: str, buyer_id: int, subscriptions: Iterable[int], **payload: object
) -> list[OutboxMessage]:
    """The outbox rows of one moment for each of the buyer's subscriptions (inside the writer's
    transaction; bulk_create them with ignore_conflicts)."""
    return [
        OutboxMessage(
            topic=TOPIC,
            key=f"{key}-{subscription}",
            payload={"moment": moment, "buyer": buyer_id, "subscription": subscription, **payload},
        )
        for subscription in subscriptions
    ]


def subscriptions_of(buyer_ids: Iterable[int]) -> dict[int, list[int]]:
    """Each buyer's subscription ids (none: absent); empty while push is off."""
    if not enabled():
        return {}
    found: dict[int, list[int]] = {}
    rows = PushSubscription.objects.filter(buyer_id__in=list(set(buyer_ids))).order_by("pk")
    for pk, buyer in rows.values_list("pk", "buyer_id"):
        found.setdefault(buyer, []).append(pk)
    return found


def announce_turns(*, batch: int = BATCH) -> int:
    """Outbox pushes for the subscribed buyers now admitted, and for the returned units now offered to
    them, not yet written; returns how many this call found due (0 while push is off). Two callers at
    once may find the same: the unique key keeps one row, the later insert waiting for the first."""
    if not enabled():
        return 0
    with transaction.atomic(durable=True):
        with connection.cursor() as cursor:
            cursor.execute(sql.TURN_PUSHES_DUE, {"topic": TOPIC, "limit": batch})
            due = cursor.fetchall()
        OutboxMessage.objects.bulk_create(
            [
                OutboxMessage(
                    topic=TOPIC,
                    key=f"{moment}-{ref}-{subscription}",
                    payload={
                        "moment": moment,
                        "buyer": buyer,
                        "subscription": subscription,
                        "drop": drop,
                        ("ticket" if moment == ADMITTED else "hold"): ref,
                    },
                )
                for moment, subscription, ref, drop, buyer in due
            ],
            ignore_conflicts=True,  # the unique (topic, key): one push per moment and subscription
        )
        if due:
            transaction.on_commit(lambda: current_app.send_task("checkout.relay_outbox"))
    if due:
        log.info("turn pushes written to the outbox: %s", len(due))
    return len(due)


# Sending --------------------------------------------------------------------------------------


def _absolute(path: str) -> str:
    return settings.PUBLIC_BASE_URL.rstrip("/") + path


def _id(payload: dict[str, object], name: str) -> int:
    value = payload.get(name)
    return value if isinstance(value, int) else 0  # 0: no row has it


def words(payload: dict[str, object]) -> dict[str, str]:
    """The notification (title, body, the page it opens), in the active language (the buyer's)."""
    drop = Drop.objects.select_related("product").get(pk=_id(payload, "drop"))
    title = drop.display_title
    moment = payload["moment"]
    queue = _absolute(reverse("drop-queue", kwargs={"slug": drop.slug}))
    if moment == ADMITTED:
        grace = min(settings.ADMISSION_GRACE_SECONDS, settings.ADMISSION_TOKEN_SECONDS)
        return {
            "title": _("It's your turn: %(title)s") % {"title": title},
            "body": _("Open the waiting room within %(time)s to reserve your unit.")
            % {"time": formatting.duration(grace)},
            "url": queue,
        }
    if moment == OFFERED:
        hold = Hold.objects.filter(pk=_id(payload, "hold")).first()
        until = formatting.moment(hold.expires_at) if hold is not None else ""
        return {
            "title": _("A unit of %(title)s came back: it is yours") % {"title": title},
            "body": _("It is held for you until %(time)s.") % {"time": until},
            "url": _absolute(hold.get_absolute_url()) if hold is not None else queue,
        }
    if moment == RAFFLE:
        hold = Hold.objects.filter(pk=_id(payload, "hold")).first()
        if payload.get("result") == "won" and hold is not None:
            return {
                "title": _("You won: pay for your unit of %(title)s") % {"title": title},
                "body": _("Pay before %(time)s.") % {"time": formatting.moment(hold.expires_at)},
                "url": _absolute(hold.get_absolute_url()),
            }
        return {
            "title": _("The raffle of %(title)s is decided") % {"title": title},
            "body": _("Not won this time."),
            "url": _absolute(reverse("drop-queue-verify", kwargs={"slug": drop.slug})),
        }
    if moment == REMINDER:
        if drop.waiting_room and timezone.now() < drop.starts_at:
            return {
                "title": _("The waiting room of %(title)s is open") % {"title": title},
                "body": _("Join now: everyone who joins before the start is drawn at random."),
                "url": queue,
            }
        return {
            "title": _("%(title)s is on sale now") % {"title": title},
            "body": _("Open the drop to buy."),
            "url": _absolute(drop.get_absolute_url()),
        }
    raise ValueError(f"unknown push moment {moment}")


def deliver(message: OutboxMessage) -> None:
    """Encrypt and send one outbox push; a subscription the push service says is gone is removed.
    Any other refusal raises, so the relay tries again later."""
    payload = message.payload
    subscription = PushSubscription.objects.filter(pk=_id(payload, "subscription")).first()
    if subscription is None or not enabled():
        return  # unsubscribed since, or push turned off: delivered as far as it can be
    notification = {**words(payload), "tag": message.key.rsplit("-", 1)[0]}
    try:
        webpush(
            subscription_info={
                "endpoint": subscription.endpoint,
                "keys": {"p256dh": subscription.p256dh, "auth": subscription.auth},
            },
            data=json.dumps(notification),
            vapid_private_key=vapid(),
            vapid_claims={"sub": subject()},
            ttl=TTL.get(str(payload.get("moment")), 300),
            timeout=PUSH_TIMEOUT,
            headers={"Urgency": "high"},
        )
    except WebPushException as error:
        status = getattr(error.response, "status_code", None)
        if status in GONE:
            PushSubscription.objects.filter(pk=subscription.pk).delete()
            log.info("push subscription %s gone (%s): removed", subscription.pk, status)
            return
        raise
