"""The outbox relay: each message leaves once with its key; a failure or a crash loses none."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import get_user_model

from checkout import emails, outbox
from checkout.models import Order, OrderState, OutboxMessage
from checkout.outbox import EMAIL_TOPIC, MERCHANT_TOPIC, relay_outbox
from config.celery import app as celery_app
from holds import services as holds
from tests.conftest import Worker, app_env, purge_queue
from tests.factories import make_drop


class Consumer:
    """A real HTTP merchant endpoint in a thread: records (key, body) of every request on arrival."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict]] = []
        self.failing: set[str] = set()  # keys answered with 500
        self.slow: dict[str, float] = {}  # key -> seconds to sleep before answering
        self.slow_arrived = threading.Event()
        self._lock = threading.Lock()
        consumer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get("Idempotency-Key", "")
                with consumer._lock:
                    consumer.received.append((key, body))
                if key in consumer.slow:
                    consumer.slow_arrived.set()
                    time.sleep(consumer.slow[key])
                status = 500 if key in consumer.failing else 200
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"{}")
                except OSError:  # the sender died while this one slept
                    pass

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/orders"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def keys(self) -> Counter[str]:
        with self._lock:
            return Counter(key for key, _ in self.received)


@pytest.fixture
def consumer() -> Iterator[Consumer]:
    found = Consumer()
    found.thread.start()
    yield found
    found.server.shutdown()
    found.server.server_close()


def confirmed_orders(n: int) -> list[Order]:
    """n sold holds with their confirmed orders, each buyer with an email address."""
    drop = make_drop(quantity=n, buckets=1)
    orders = []
    for i in range(n):
        buyer = get_user_model().objects.create_user(
            username=f"outbox-{uuid.uuid4().hex[:8]}-{i}", email=f"buyer{i}@example.test"
        )
        hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
        assert holds.confirm(hold_id=hold.pk)
        orders.append(
            Order.objects.create(
                hold=hold,
                buyer=buyer,
                drop=drop,
                quantity=1,
                amount_minor=drop.product.price_minor,
                currency=drop.product.currency,
                state=OrderState.CONFIRMED,
            )
        )
    return orders


def announce(orders: list[Order], topics: tuple[str, ...] = (MERCHANT_TOPIC, EMAIL_TOPIC)) -> list[str]:
    """Outbox rows as the saga writes them (same key and payload shape); returns the keys in order."""
    keys = []
    for order in orders:
        key, payload = outbox.confirmation(order)
        for topic in topics:
            OutboxMessage.objects.create(topic=topic, key=key, payload=payload)
        keys.append(key)
    return keys


def merchant(key: str) -> OutboxMessage:
    return OutboxMessage.objects.get(topic=MERCHANT_TOPIC, key=key)


def wait_until(check: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


@pytest.mark.django_db
def test_every_message_is_delivered_once_with_its_key(settings, consumer: Consumer, mailoutbox) -> None:
    # given four confirmed orders, each announced to the merchant and by email
    orders = confirmed_orders(4)
    keys = announce(orders)
    settings.MERCHANT_WEBHOOK_URL = consumer.url

    # when the relay runs, then runs again
    first = relay_outbox()
    second = relay_outbox()

    # then each merchant message arrived once, with its key and its order
    assert (first, second) == (8, 0)
    assert consumer.keys() == Counter(keys)
    assert {key: body["order"] for key, body in consumer.received} == {
        key: order.pk for key, order in zip(keys, orders, strict=True)
    }
    assert not OutboxMessage.objects.filter(sent_at__isnull=True).exists()
    assert set(OutboxMessage.objects.values_list("attempts", flat=True)) == {1}
    assert sorted(m.extra_headers["Message-ID"] for m in mailoutbox) == sorted(
        emails.message_id(k) for k in keys
    )
    assert sorted(m.to[0] for m in mailoutbox) == sorted(o.buyer.email for o in orders)


@pytest.mark.django_db
def test_a_failing_consumer_keeps_its_message_for_the_next_round(settings, consumer: Consumer) -> None:
    keys = announce(confirmed_orders(3), topics=(MERCHANT_TOPIC,))
    settings.MERCHANT_WEBHOOK_URL = consumer.url
    consumer.failing.add(keys[1])

    sent = relay_outbox()

    assert sent == 2
    refused = merchant(keys[1])
    assert (refused.sent_at, refused.attempts) == (None, 1)
    assert "500" in refused.last_error
    assert all(merchant(k).sent_at is not None for k in (keys[0], keys[2]))

    # the consumer recovers: the next round due (after any backoff) sends only the one left behind
    consumer.failing.clear()
    rounds: list[int] = []

    def relayed() -> bool:
        rounds.append(relay_outbox())
        return rounds[-1] > 0

    wait_until(relayed, seconds=30)
    assert rounds[-1] == 1 and relay_outbox() == 0
    recovered = merchant(keys[1])
    assert recovered.sent_at is not None and recovered.attempts == 2
    assert consumer.keys() == Counter({keys[0]: 1, keys[1]: 2, keys[2]: 1})


@pytest.mark.django_db(transaction=True)
def test_a_relay_killed_mid_delivery_repeats_only_the_message_in_flight(
    payment_provider: str, live_daphne: str, consumer: Consumer
) -> None:
    # given six merchant messages; the consumer takes 3 s to answer the third
    keys = announce(confirmed_orders(6), topics=(MERCHANT_TOPIC,))
    in_flight = keys[2]
    consumer.slow[in_flight] = 3
    env = {
        **app_env(payment_provider, live_daphne),
        "MERCHANT_WEBHOOK_URL": consumer.url,
        "DB_POOL_MAX_SIZE": "4",
    }
    purge_queue()
    worker = Worker(env)
    worker.start()
    try:
        celery_app.send_task("checkout.relay_outbox")
        assert consumer.slow_arrived.wait(60), "the worker never reached the slow message"

        # the two before it are sent and committed; the one in flight is not
        assert [merchant(k).sent_at is not None for k in keys] == [True, True, False, False, False, False]

        # when the worker dies mid-delivery and comes back
        worker.kill()
        assert merchant(in_flight).sent_at is None
        worker.start()
        celery_app.send_task("checkout.relay_outbox")
        wait_until(lambda: not OutboxMessage.objects.filter(sent_at__isnull=True).exists(), seconds=60)
        time.sleep(2)  # room for a redelivered task or a stray repeat to show up
    finally:
        worker.stop()
        purge_queue()

    # then nothing sent before the crash went again; only the message in flight was repeated
    seen = consumer.keys()
    assert seen == Counter({**dict.fromkeys(keys, 1), in_flight: 2}), seen
    assert {body["order"] for key, body in consumer.received if key == in_flight} == {
        merchant(in_flight).payload["order"]
    }
    assert merchant(in_flight).attempts == 1  # the killed attempt left no trace
    assert OutboxMessage.objects.filter(sent_at__isnull=False).count() == 6
