"""Web Push when it is the buyer's turn (issue 41): opted into from the waiting page, written to the
outbox once per moment and browser, encrypted to the browser's own keys and signed with the shop's
VAPID key, in the buyer's language. A push service on localhost (tests/checkout/helpers.py) checks
the signature and decrypts every push as the browser would; the control shows that senders without
the outbox's key push one turn several times, which it counts."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone, translation

from admission import services as admission
from checkout import outbox, push, raffles, reminders, sql, vapid
from checkout.models import OutboxMessage, PushSubscription, Reminder
from core.errors import SoldOut
from holds import services as holds
from sale import offers
from shop import languages
from shop.models import Drop
from tests.checkout.helpers import PushService, Subscriber
from tests.concurrency import run_concurrently
from tests.factories import make_buyer, make_drop, start_now
from tests.sale.helpers import in_line, offer_of

GERMAN = "de-DE,de;q=0.9"


@pytest.fixture
def service(tmp_path, monkeypatch, settings) -> Iterator[PushService]:
    found = PushService(tmp_path)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(found.cert_path))  # the sender trusts its certificate
    settings.WEB_PUSH_HOSTS = ["localhost"]
    yield found
    found.close()


def signed_in(buyer: User, *, accept: str = "en") -> Client:
    client = Client(enforce_csrf_checks=True, headers={"Accept-Language": accept})
    client.force_login(buyer)
    client.get("/")  # the CSRF cookie, and the buyer's language recorded
    return client


def post(client: Client, body: object, method: str = "post"):
    return getattr(client, method)(
        "/api/push/subscription",
        body,
        content_type="application/json",
        HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value,
    )


def opted_in(service: PushService, buyer: User, *, accept: str = "en") -> Subscriber:
    """The buyer presses the waiting page's button: their browser's subscription posted to the API."""
    browser = service.subscriber()
    answer = post(signed_in(buyer, accept=accept), browser.subscription())
    assert answer.status_code == 201, answer.content
    return browser


def relay() -> int:
    with translation.override("en"):  # a worker of its own language: the buyer's must win
        return outbox.relay_outbox()


# The endpoint ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_subscription_is_stored_once_per_browser_and_garbage_is_refused(service: PushService) -> None:
    buyer = make_buyer("opt-in")
    client = signed_in(buyer)
    browser = service.subscriber()
    good = browser.subscription()
    keys = good["keys"]

    assert post(client, good).status_code == 201
    again = post(client, good)
    assert again.status_code == 200 and again.json() == {"subscribed": True}

    bad_point = "BA" + "A" * 85  # 65 bytes, 0x04 then zeros: not a point of P-256
    garbage = [
        {},
        {"endpoint": good["endpoint"]},  # no keys
        {**good, "endpoint": good["endpoint"].replace("https:", "http:")},
        {**good, "endpoint": "https://127.0.0.1:5432/x"},  # not a push service the shop sends to
        {**good, "endpoint": "https://localhost.evil.example/x"},
        {**good, "endpoint": "https://user@localhost/x"},
        {**good, "endpoint": "https://localhost:notaport/x"},
        {**good, "endpoint": "https://localhost/" + "x" * 1000},
        {**good, "endpoint": good["endpoint"] + "\x00"},
        {**good, "endpoint": good["endpoint"] + "ü"},
        {**good, "keys": {**keys, "auth": keys["auth"][:10] + "\x00" + keys["auth"][10:]}},
        {**good, "keys": {**keys, "p256dh": keys["p256dh"][:-4]}},  # short
        {**good, "keys": {**keys, "p256dh": bad_point}},
        {**good, "keys": {**keys, "p256dh": "!!not base64!!"}},
        {**good, "keys": {**keys, "auth": keys["auth"] + "AAAA"}},
        {**good, "keys": {**keys, "auth": 7}},
        {**good, "keys": "p256dh"},
        [good],
    ]
    for body in garbage:
        answer = post(client, body)
        assert answer.status_code == 422, body
        assert answer.json()["error"] == "invalid" and answer.json()["detail"], body
    not_json = client.post(
        "/api/push/subscription",
        b"{",
        content_type="application/json",
        HTTP_X_CSRFTOKEN=client.cookies["csrftoken"].value,
    )
    assert not_json.status_code == 422
    assert PushSubscription.objects.count() == 1  # the garbage changed nothing

    # no CSRF token with the session, or nobody signed in: refused, nothing stored
    assert client.post("/api/push/subscription", good, content_type="application/json").status_code == 403
    assert Client().post("/api/push/subscription", good, content_type="application/json").status_code == 401

    # another buyer signed in on the same browser takes its subscription over
    other = make_buyer("same-browser")
    assert post(signed_in(other), good).status_code == 200
    assert list(PushSubscription.objects.values_list("buyer_id", flat=True)) == [other.pk]

    # stop: forgotten (another buyer's endpoint is not theirs to forget)
    assert post(client, good, "delete").json() == {"subscribed": False}
    assert PushSubscription.objects.count() == 1
    assert post(signed_in(other), {"endpoint": good["endpoint"]}, "delete").status_code == 200
    assert PushSubscription.objects.count() == 0


@pytest.mark.django_db
def test_with_push_off_there_is_no_button_and_the_endpoint_says_so(service: PushService, settings) -> None:
    drop = make_drop(slug="push-page", quantity=5, waiting_room=True)
    buyer = make_buyer("page")
    client = signed_in(buyer)
    admission.join(drop=drop, buyer_id=buyer.pk)
    page = client.get(f"/drops/{drop.slug}/queue/").content.decode()
    assert 'id="push-optin"' in page and f'data-key="{vapid.public_key()}"' in page

    settings.WEB_PUSH_VAPID_KEY = ""  # production's default: push off
    assert 'id="push-optin"' not in client.get(f"/drops/{drop.slug}/queue/").content.decode()
    answer = post(client, service.subscriber().subscription())
    assert answer.status_code == 404 and answer.json()["error"] == "push_off"
    assert push.announce_turns() == 0


@pytest.mark.django_db
def test_the_service_worker_is_served_from_the_root_so_its_scope_covers_every_page() -> None:
    answer = Client().get("/push-worker.js")
    assert answer.status_code == 200
    assert answer["Content-Type"].startswith("text/javascript")
    assert answer["Service-Worker-Allowed"] == "/" and answer["Cache-Control"] == "no-cache"
    assert b'addEventListener("push"' in answer.content and b"showNotification" in answer.content


# The pushes ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_german_buyer_admitted_gets_one_encrypted_push_in_german(service: PushService) -> None:
    # given a German buyer in line who opted in on their phone, and an English one who did not
    drop = make_drop(slug="dran", quantity=2, waiting_room=True, admission_percent=100)
    admission.run_wave(drop)  # the start: an empty draw
    dora, eric = make_buyer("dora"), make_buyer("eric")
    phone = opted_in(service, dora, accept=GERMAN)
    assert languages.of(dora.pk, default="en") == "de"
    for buyer in (dora, eric):
        admission.join(drop=drop, buyer_id=buyer.pk)

    # when the wave lets them in, and the duty and the relay run (twice, as beat would)
    admission.run_wave(drop, force=True)
    assert push.announce_turns() == 1
    assert relay() == 1, service.refused
    assert push.announce_turns() == 0 and relay() == 0

    # then the phone got one push, signed with the shop's key, decrypted with its own keys, in German
    (delivery,) = service.to(phone)
    assert not service.refused
    assert delivery.vapid_key == vapid.public_key()
    assert delivery.claims["aud"] == service.origin and delivery.claims["sub"].startswith("mailto:")
    assert delivery.headers["urgency"] == "high"
    assert delivery.notification == {
        "title": f"Sie sind an der Reihe: {drop.display_title}",
        "body": "Öffnen Sie den Warteraum innerhalb von 30 Sekunden, um Ihr Stück zu reservieren.",
        "url": f"http://testserver/drops/{drop.slug}/queue/".replace("http://testserver", _base()),
        "tag": f"admitted-{_ticket(drop, dora)}",
    }
    assert len(service.deliveries) == 1  # the buyer who did not opt in: nothing


def _base() -> str:
    from django.conf import settings

    return settings.PUBLIC_BASE_URL.rstrip("/")


def _ticket(drop: Drop, buyer: User) -> int:
    return admission.place(drop=drop, buyer_id=buyer.pk).ticket.pk


@pytest.mark.django_db
def test_a_unit_offered_a_raffle_drawn_and_a_reminded_drop_opening_each_push_once(
    service: PushService, make_buyers, django_capture_on_commit_callbacks
) -> None:
    # a returned unit offered to the next ticket
    drop = make_drop(slug="came-back", quantity=1, waiting_room=True, offer_seconds=60)
    by_number = in_line(drop.pk, make_buyers(2, prefix="back"))
    phone = opted_in(service, get_user_model().objects.get(pk=by_number[2]))
    first = holds.reserve(drop=drop, buyer_id=by_number[1], quantity=1, idempotency_key="k").hold
    holds.release(hold_id=first.pk, buyer_id=by_number[1])
    offers.offer_returns(drop)
    offer = offer_of(drop.pk, 2)
    assert offer is not None
    push.announce_turns()
    relay()
    offered = [d.notification for d in service.to(phone) if d.notification["tag"].startswith("offered")]
    assert len(offered) == 1 and offered[0]["url"].endswith(f"/holds/{offer.hold}/")
    assert offered[0]["title"] == f"A unit of {drop.display_title} came back: it is yours"

    # a raffle drawn: the winner hears on their phone, once (the e-mail's row goes with it)
    raffle = make_drop(
        slug="push-raffle",
        quantity=1,
        waiting_room=True,
        raffle=True,
        offer_seconds=600,
        starts_at=timezone.now() + timedelta(minutes=10),
    )
    entrant = make_buyer("entrant")
    lucky = opted_in(service, entrant, accept=GERMAN)
    admission.join(drop=raffle, buyer_id=entrant.pk)
    start_now(raffle.pk)
    raffle = Drop.objects.select_related("product").get(pk=raffle.pk)
    with django_capture_on_commit_callbacks(execute=True):  # the draw's map is published on commit
        admission.run_wave(raffle)
    offers.offer_returns(raffle, wait=True)
    assert raffles.announce_raffle_results() == 1  # the e-mail; the push is written beside it
    assert raffles.announce_raffle_results() == 0
    assert push.announce_turns() == 0  # a raffle's offer is its result, not a second push
    relay()
    (won,) = [d.notification for d in service.to(lucky)]
    assert won["title"] == f"Sie haben gewonnen: Bezahlen Sie Ihr Stück von {raffle.display_title}"

    # a reminded drop opening
    later = make_drop(slug="remind-push", quantity=3, starts_at=timezone.now() + timedelta(hours=2))
    waiting = make_buyer("waits")
    ring = opted_in(service, waiting)
    reminders.ask_reminder(drop=later, buyer_id=waiting.pk)
    start_now(later.pk)
    assert reminders.send_due_reminders() == 1
    assert reminders.send_due_reminders() == 0
    relay()
    (opened,) = [d.notification for d in service.to(ring)]
    assert opened["title"] == f"{later.display_title} is on sale now"
    assert opened["url"].endswith(later.get_absolute_url())
    assert Reminder.objects.get(drop=later).sent_at is not None
    assert not service.refused


@pytest.mark.parametrize(("status", "forgotten"), [(404, True), (410, True), (500, False)])
@pytest.mark.django_db
def test_a_subscription_the_push_service_forgot_is_removed(
    service: PushService, status: int, forgotten: bool
) -> None:
    drop = make_drop(slug=f"gone-{status}", quantity=2, waiting_room=True, admission_percent=100)
    admission.run_wave(drop)
    buyer = make_buyer(f"gone-{status}")
    phone = opted_in(service, buyer)
    admission.join(drop=drop, buyer_id=buyer.pk)
    admission.run_wave(drop, force=True)
    service.gone[phone.token] = status  # 404/410: the browser unsubscribed; 500: the service is down

    push.announce_turns()
    sent = relay()

    # forgotten: the row goes and the push counts as delivered; the control, a failing service,
    # keeps both for the next round
    message = OutboxMessage.objects.get(topic=push.TOPIC)
    assert PushSubscription.objects.exists() is not forgotten
    assert (sent, message.sent_at is not None) == ((1, True) if forgotten else (0, False))
    assert forgotten or "500" in message.last_error


# Once, under a race of senders -----------------------------------------------------------------


def admitted_line(service: PushService, n: int, slug: str) -> list[Subscriber]:
    """n buyers in line, each with a phone, all admitted by one wave."""
    drop = make_drop(slug=slug, quantity=n, waiting_room=True, admission_percent=100)
    admission.run_wave(drop)
    phones = []
    for i in range(n):
        buyer = make_buyer(f"{slug}-{i}")
        phones.append(opted_in(service, buyer))
        admission.join(drop=drop, buyer_id=buyer.pk)
    admission.run_wave(drop, force=True)
    return phones


@pytest.mark.django_db(transaction=True)
def test_control_senders_that_push_what_they_read_push_a_turn_several_times(service: PushService) -> None:
    # given admitted buyers with phones, and senders that read the due turns and push them
    # straight away, without the outbox's key
    phones = admitted_line(service, 5, "careless")
    read = threading.Barrier(4)

    def careless_send() -> int:
        with connection.cursor() as cursor:
            cursor.execute(sql.TURN_PUSHES_DUE, {"topic": push.TOPIC, "limit": 100})
            due = cursor.fetchall()
        read.wait()  # everyone has read before anyone sends
        for moment, subscription, ref, drop, buyer in due:
            message = OutboxMessage(
                topic=push.TOPIC,
                key=f"{moment}-{ref}-{subscription}",
                payload={"moment": moment, "buyer": buyer, "subscription": subscription, "drop": drop},
            )
            push.deliver(message)
        return len(due)

    # when four run at once, each on its own connection
    sent = run_concurrently([careless_send] * 4, threads=4)

    # then each phone heard its turn four times: the race the outbox closes is real, and counted
    assert sent == [5, 5, 5, 5], sent
    assert Counter(d.token for d in service.deliveries) == Counter({p.token: 4 for p in phones})


@pytest.mark.django_db(transaction=True)
def test_senders_at_once_push_each_turn_once(service: PushService) -> None:
    # given 40 admitted buyers with phones
    phones = admitted_line(service, 40, "at-once")

    # when eight senders run the duty and the relay together, each on its own connection
    def send() -> tuple[int, int]:
        found = 0
        while written := push.announce_turns(batch=7):  # beat's runs, in batches, till none is due
            found += written
        return found, relay()

    results = run_concurrently([send] * 8, threads=8)
    later = (push.announce_turns(), relay())  # beat's next run: what the last writers left to relay

    # then each phone heard once, everything decrypted and verified
    assert all(isinstance(r, tuple) for r in results), results
    assert sum(r[0] for r in results if isinstance(r, tuple)) >= 40  # several may have found one due
    assert sum(r[1] for r in results if isinstance(r, tuple)) + later[1] == 40 and later[0] == 0
    assert Counter(d.token for d in service.deliveries) == Counter({p.token: 1 for p in phones})
    assert not service.refused
    assert OutboxMessage.objects.filter(topic=push.TOPIC, sent_at__isnull=False).count() == 40


# Coming back within the grace ------------------------------------------------------------------


@pytest.mark.parametrize(("back_after", "finds_it"), [(10, True), (45, False)], ids=["grace", "control"])
@pytest.mark.django_db
def test_an_admitted_buyer_who_comes_back_within_the_grace_finds_the_unit_waiting(
    service: PushService, settings, back_after: int, finds_it: bool
) -> None:
    # given one unit, a phone's owner admitted first and another buyer behind them
    settings.ADMISSION_TOKEN_SECONDS, settings.ADMISSION_GRACE_SECONDS = 120, 30
    drop = make_drop(slug=f"grace-{back_after}", quantity=1, waiting_room=True, admission_percent=100)
    now = timezone.now()
    admission.run_wave(drop, now=now)
    away, behind = make_buyer(f"away-{back_after}"), make_buyer(f"behind-{back_after}")
    phone = opted_in(service, away)
    for buyer in (away, behind):
        admission.join(drop=drop, buyer_id=buyer.pk)
    admitted = admission.run_wave(drop, now=now + timedelta(seconds=1), force=True)
    assert admitted is not None and admitted.admitted == 1
    push.announce_turns()
    relay()
    (told,) = service.to(phone)  # the phone in the pocket heard it

    # when waves run while they are away, and the one behind buys if let in
    wave = admission.run_wave(drop, now=now + timedelta(seconds=back_after), force=True)
    if wave is not None and wave.admitted:
        token = admission.place(drop=drop, buyer_id=behind.pk).token
        assert token
        holds.reserve(drop=drop, buyer_id=behind.pk, quantity=1, idempotency_key="b")

    # then the buyer, back from the push's link, is still admitted and finds the unit (the control:
    # after the grace the next wave let the one behind in, who took it)
    place = admission.place(drop=drop, buyer_id=away.pk)
    assert place.token and told.notification["url"].endswith(f"/drops/{drop.slug}/queue/")
    if finds_it:
        assert wave is None or wave.admitted == 0
        hold = holds.reserve(drop=drop, buyer_id=away.pk, quantity=1, idempotency_key="a").hold
        assert hold.quantity == 1
    else:
        with pytest.raises(SoldOut):
            holds.reserve(drop=drop, buyer_id=away.pk, quantity=1, idempotency_key="a")
