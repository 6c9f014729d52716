""" "Tell me when it opens" (issue 25 §3): a buyer asks on the drop page before the start, and gets
one e-mail with the start as an .ics when the sale opens, however many senders run at once: threads,
two real Celery workers, a task retried after a batch of it failed."""

from __future__ import annotations

import email
import email.policy
import re
import threading
import uuid
from datetime import UTC, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import icalendar
import psycopg
import pytest
from celery import current_app
from django.conf import settings
from django.contrib.auth.models import User
from django.core import mail as sent_mail
from django.db import connection, transaction
from django.db.models.functions import Now
from django.test import Client
from django.utils import timezone

from checkout import outbox, reminders
from checkout.models import OutboxMessage, Reminder
from core.errors import NotFound
from shop.models import ApiToken, Drop, RehearsalBuyer
from tests.checkout.helpers import wait_until
from tests.concurrency import run_concurrently
from tests.conftest import ROOT, Worker, database_url_for_tests
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db(transaction=True)

MAIL_DIR = ROOT / ".data" / "test" / "mail"  # where the workers' file backend writes (conftest.app_env)


def opening_drop(buyers: list[User], **options: Any) -> Drop:
    """A drop an hour from its start with a reminder for each buyer, then opened on the database's clock."""
    drop = make_drop(quantity=10, starts_at=timezone.now() + timedelta(hours=1), **options)
    for buyer in buyers:
        assert reminders.ask_reminder(drop=drop, buyer_id=buyer.pk).new
    Drop.objects.filter(pk=drop.pk).update(starts_at=Now() - timedelta(seconds=1))
    return Drop.objects.get(pk=drop.pk)


def unfolded(ics: str, *, by_mail: bool = False) -> dict[str, str]:
    """The event's properties (RFC 5545: CRLF lines, a continuation starts with a space). A text part
    of an e-mail is read with the reader's line ends, so there CRLF is put back first."""
    if by_mail:
        assert "\r" not in ics
        ics = ics.replace("\n", "\r\n")
    assert "\n" not in ics.replace("\r\n", ""), "bare line feeds"
    lines = ics.replace("\r\n ", "").split("\r\n")
    assert lines[-1] == "" and all(len(line.encode()) <= 75 for line in ics.split("\r\n"))
    found: dict[str, str] = {}
    for line in lines[:-1]:
        name, _, value = line.partition(":")
        found.setdefault(name, value)  # the first: the event's DESCRIPTION before its alarm's
    return found


def mails_to(addresses: set[str]) -> list[EmailMessage]:
    """Every message the file backend wrote to one of these addresses."""
    found = []
    for path in sorted(MAIL_DIR.glob("*.log")):
        for raw in path.read_bytes().split(b"\n" + b"-" * 79 + b"\n"):
            if raw.strip():
                message = email.message_from_bytes(raw, policy=email.policy.default)
                assert isinstance(message, EmailMessage)
                if message["To"] in addresses:
                    found.append(message)
    return found


def test_control_senders_that_read_then_mark_send_a_reminder_twice() -> None:
    # given reminders of an open drop, and senders that read the unsent ones and then mark them
    buyers = [make_buyer(f"ctl{i}") for i in range(5)]
    drop = opening_drop(buyers)
    read = threading.Barrier(4)

    def careless_send() -> list[int]:
        with transaction.atomic():
            due = list(Reminder.objects.filter(drop=drop, sent_at__isnull=True).values_list("pk", flat=True))
            read.wait()  # everyone has read before anyone marks
            Reminder.objects.filter(pk__in=due).update(sent_at=Now())
        return due

    # when four run at once
    sent = run_concurrently([careless_send] * 4, threads=4)

    # then each reminder went out four times: the race the conditional mark closes is real
    assert [len(s) for s in sent if isinstance(s, list)] == [5, 5, 5, 5], sent


def test_senders_at_once_write_each_reminder_as_one_message() -> None:
    buyers = [make_buyer(f"at-once{i}") for i in range(60)]
    drop = opening_drop(buyers)
    later = make_drop(quantity=1, starts_at=timezone.now() + timedelta(hours=1))
    waiting = reminders.ask_reminder(drop=later, buyer_id=buyers[0].pk)

    # when eight senders run together, in batches of 7
    results = run_concurrently([lambda: reminders.send_due_reminders(batch=7)] * 8, threads=8)

    # then every reminder is one outbox message, written once, and the later drop's waits
    assert sum(r for r in results if isinstance(r, int)) == 60, results
    messages = OutboxMessage.objects.filter(topic=outbox.REMINDER_TOPIC, payload__drop=drop.pk)
    assert sorted(messages.values_list("payload__buyer", flat=True)) == sorted(b.pk for b in buyers)
    assert not Reminder.objects.filter(drop=drop, sent_at__isnull=True).exists()
    assert Reminder.objects.get(pk=waiting.reminder_id).sent_at is None
    assert reminders.send_due_reminders() == 0  # a sender after them finds nothing


def test_two_senders_at_once_then_a_retry_write_300_reminders_as_300_messages() -> None:
    # given 300 reminders of a drop that has just opened
    drop = make_drop(quantity=10, starts_at=timezone.now() + timedelta(hours=1))
    buyers = User.objects.bulk_create(
        [User(username=f"many-{i}", email=f"many-{i}@example.com") for i in range(300)]
    )
    Reminder.objects.bulk_create([Reminder(drop=drop, buyer=buyer) for buyer in buyers])
    Drop.objects.filter(pk=drop.pk).update(starts_at=Now() - timedelta(seconds=1))

    # when two senders, each on its own connection, start together in batches of 25, and then the
    # task runs again as a retry would
    results = run_concurrently([lambda: reminders.send_due_reminders(batch=25)] * 2, threads=2)
    retried = reminders.send_due_reminders(batch=25)

    # then each reminder is one outbox message: 300 in all, none twice, nothing left for the retry
    assert sum(r for r in results if isinstance(r, int)) == 300, results
    assert retried == 0
    keys = list(
        OutboxMessage.objects.filter(topic=outbox.REMINDER_TOPIC, payload__drop=drop.pk).values_list(
            "key", flat=True
        )
    )
    assert len(keys) == len(set(keys)) == 300
    assert not Reminder.objects.filter(drop=drop, sent_at__isnull=True).exists()


def test_an_ended_drop_sends_no_reminder_and_a_rehearsal_copy_takes_none() -> None:
    buyer = make_buyer("late-reader")
    drop = opening_drop([buyer])
    Drop.objects.filter(pk=drop.pk).update(ends_at=Now())  # it ended before any sender ran
    assert reminders.send_due_reminders() == 0
    copy = make_drop(quantity=1, starts_at=timezone.now() + timedelta(hours=1), rehearsal_of=drop)
    with pytest.raises(NotFound):  # a rehearsal's copy exists for its own buyers only
        reminders.ask_reminder(drop=copy, buyer_id=buyer.pk)


def test_the_drop_page_asks_and_forgets_a_reminder_and_refuses_garbage() -> None:
    drop = make_drop(quantity=5, starts_at=timezone.now() + timedelta(hours=1))
    buyer = make_buyer("page-reader")
    client = Client()
    # a visitor is asked to log in; the calendar file is anyone's
    anonymous = client.get(drop.get_absolute_url()).content.decode()
    assert "Log in</a> to be told" in anonymous and 'id="add-to-calendar"' in anonymous
    assert client.post(f"/drops/{drop.slug}/remind").status_code == 302
    calendar = client.get(f"/drops/{drop.slug}/calendar.ics")
    assert calendar.status_code == 200 and calendar["Content-Type"].startswith("text/calendar")
    start = unfolded(calendar.content.decode())["DTSTART"]
    assert start == f"{drop.starts_at.astimezone(UTC):%Y%m%dT%H%M%SZ}"
    # a buyer asks (twice: one reminder), the page says so, then forgets it
    client.force_login(buyer)
    assert 'id="remind-me"' in client.get(drop.get_absolute_url()).content.decode()
    for _ in range(2):
        asked = client.post(f"/drops/{drop.slug}/remind", follow=True)
        assert asked.status_code == 200
        assert "We will e-mail you when the sale opens." in asked.content.decode()
    assert Reminder.objects.filter(drop=drop, buyer=buyer).count() == 1
    assert 'id="forget-reminder"' in client.get(drop.get_absolute_url()).content.decode()
    client.post(f"/drops/{drop.slug}/remind", {"forget": "1"})
    assert not Reminder.objects.exists()

    # garbage: each a clear 4xx, and no reminder
    started = make_drop(quantity=5)
    refused = client.post(f"/drops/{started.slug}/remind")
    assert refused.status_code == 409 and "no reminder is needed" in refused.content.decode()
    assert client.post("/drops/no-such-drop/remind").status_code == 404
    assert client.get(f"/drops/{drop.slug}/remind").status_code == 405
    assert client.post(f"/drops/{drop.slug}/calendar.ics").status_code == 405
    assert client.get("/drops/no-such-drop/calendar.ics").status_code == 404
    for forget in ("\x00" * 10_000, "yes", "0"):
        assert client.post(f"/drops/{drop.slug}/remind", {"forget": forget}).status_code == 400
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(buyer)
    assert strict.post(f"/drops/{drop.slug}/remind").status_code == 403
    copy = make_drop(quantity=1, starts_at=timezone.now() + timedelta(hours=1), rehearsal_of=drop)
    assert client.post(f"/drops/{copy.slug}/remind").status_code == 404
    assert client.get(f"/drops/{copy.slug}/calendar.ics").status_code == 404
    assert not Reminder.objects.exists()
    # once the sale is live the page offers no reminder
    assert "remind-me" not in client.get(started.get_absolute_url()).content.decode()


def test_two_workers_and_a_retried_task_send_each_buyer_one_email_with_the_start_as_ics(
    celery_worker: Worker,
) -> None:
    # given 30 buyers waiting for a drop that has just opened (addresses new to the mail folder)
    run = uuid.uuid4().hex[:8]
    buyers = [make_buyer(f"opener-{run}-{i}") for i in range(30)]
    drop = opening_drop(buyers, title='Night Runner, 1 of 30; "first" edition')
    addresses = {b.email for b in buyers}
    ids = list(Reminder.objects.filter(drop=drop).order_by("pk").values_list("pk", flat=True))
    # and a transaction elsewhere writing the 25th reminder's message, not committed yet: the batch
    # that reaches it waits past its lock timeout, fails, and its task is retried
    blocker = psycopg.connect(database_url_for_tests())
    blocker.execute(
        "INSERT INTO checkout_outboxmessage (topic, key, payload, created_at, next_attempt_at, attempts,"
        " last_error) VALUES (%s, %s, '{}', now(), now(), 0, '')",
        [outbox.REMINDER_TOPIC, f"reminder-{ids[24]}"],
    )
    # two workers, their retries logged
    celery_worker.stop()
    celery_worker.env["LOG_HOUSEKEEPING"] = "1"
    celery_worker.start()
    second = Worker(celery_worker.env)
    second.start()
    try:
        # when the duty is sent four times at once, in batches of 10
        for _ in range(4):
            current_app.send_task("checkout.send_reminders", kwargs={"batch": 10})
        logs = [Path(celery_worker.log), Path(second.log)]
        retried = re.compile(r"checkout\.send_reminders\[[^\]]+\] retry: .*lock timeout")
        wait_until(lambda: any(retried.search(log.read_text()) for log in logs), seconds=90)
        assert Reminder.objects.get(pk=ids[24]).sent_at is None  # its batch rolled back
        assert Reminder.objects.filter(drop=drop, sent_at__isnull=False).count() >= 10  # earlier ones kept
        blocker.rollback()  # the other writer gives up: the retry goes through
        wait_until(
            lambda: (
                OutboxMessage.objects.filter(
                    topic=outbox.REMINDER_TOPIC, payload__drop=drop.pk, sent_at__isnull=False
                ).count()
                == 30
            ),
            seconds=90,
        )
        nothing = re.compile(r"checkout\.send_reminders\[[^\]]+\] succeeded in [0-9.]+s: 0$", re.M)
        before = sum(len(nothing.findall(log.read_text())) for log in logs)
        current_app.send_task("checkout.send_reminders")  # a late duplicate finds nothing to send
        wait_until(lambda: sum(len(nothing.findall(log.read_text())) for log in logs) > before, seconds=30)
    finally:
        blocker.close()
        second.stop()

    # then each buyer got one e-mail, saying where to buy, with the start as a calendar event
    mails = mails_to(addresses)
    assert sorted(m["To"] for m in mails) == sorted(addresses)
    assert len({m["Message-ID"] for m in mails}) == 30
    mail = mails[0]
    assert mail["Subject"] == f"[Floodgate] {drop.display_title} is on sale now"
    body = mail.get_body(preferencelist=("plain",))
    assert body is not None and f"/drops/{drop.slug}/" in body.get_content()
    assert f"/drops/{drop.slug}/calendar.ics" in body.get_content()
    (attachment,) = [part for part in mail.iter_attachments() if part.get_content_type() == "text/calendar"]
    assert attachment.get_filename() == f"{drop.slug}.ics"
    event = unfolded(attachment.get_content(), by_mail=True)
    assert event["BEGIN"] == "VCALENDAR" and event["VERSION"] == "2.0"
    assert event["DTSTART"] == f"{drop.starts_at.astimezone(UTC):%Y%m%dT%H%M%SZ}"
    assert event["UID"] == f"drop-{drop.pk}@floodgate"
    assert event["SUMMARY"] == 'Night Runner\\, 1 of 30\\; "first" edition goes on sale'
    assert event["URL"].endswith(f"/drops/{drop.slug}/")
    assert OutboxMessage.objects.filter(topic=outbox.REMINDER_TOPIC, payload__drop=drop.pk).count() == 30
    assert connection.is_usable()


def bearer(username: str) -> dict[str, Any]:  # the test client's WSGI extras (typed Any)
    user = make_buyer(username)
    ApiToken.objects.create(user=user, digest=ApiToken.digest_of(f"token-{username}"))
    return {"HTTP_AUTHORIZATION": f"Bearer token-{username}"}


def test_the_api_asks_reads_and_forgets_a_reminder_and_refuses_garbage() -> None:
    drop = make_drop(quantity=5, starts_at=timezone.now() + timedelta(hours=1))
    url = f"/api/drops/{drop.slug}/reminder"
    auth = bearer("api-reader")
    client = Client()

    # asking twice keeps one reminder: 201, then 200 with the same answer
    first = client.post(url, **auth)
    again = client.post(url, **auth)
    assert (first.status_code, again.status_code) == (201, 200)
    assert (
        first.json()
        == again.json()
        == {
            "drop": drop.slug,
            "reminded": True,
            "sent_at": None,
            "starts_at": drop.starts_at.isoformat(),
            "sends_at": drop.starts_at.isoformat(),  # no waiting room: the start
            "calendar": f"/drops/{drop.slug}/calendar.ics",
        }
    )
    assert Reminder.objects.filter(drop=drop).count() == 1
    assert client.get(url, **auth).json()["reminded"] is True
    # forgetting it twice: the same answer, no reminder
    for _ in range(2):
        forgot = client.delete(url, **auth)
        assert forgot.status_code == 200 and forgot.json()["reminded"] is False
    assert not Reminder.objects.exists()

    # garbage: each a clear error, and no reminder
    started = make_drop(quantity=5)
    refused = client.post(f"/api/drops/{started.slug}/reminder", **auth)
    assert refused.status_code == 409 and refused.json()["error"] == "not_scheduled"
    assert "no reminder is needed" in refused.json()["detail"]
    ended = make_drop(
        quantity=5, starts_at=timezone.now() - timedelta(hours=2), ends_at=timezone.now() - timedelta(hours=1)
    )
    assert client.post(f"/api/drops/{ended.slug}/reminder", **auth).status_code == 409
    unknown = client.post("/api/drops/no-such-drop/reminder", **auth)
    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"
    copy = make_drop(quantity=1, starts_at=timezone.now() + timedelta(hours=1), rehearsal_of=drop)
    assert client.post(f"/api/drops/{copy.slug}/reminder", **auth).status_code == 404
    rehearsal_auth = bearer("api-rehearsal")
    RehearsalBuyer.objects.create(user=User.objects.get(username="api-rehearsal"), drop=copy)
    forbidden = client.post(url, **rehearsal_auth)
    assert forbidden.status_code == 403 and forbidden.json()["error"] == "forbidden"
    assert client.post(url).status_code == 401  # nobody signed in
    assert client.post(url, HTTP_AUTHORIZATION="Bearer not-a-token").status_code == 401
    wrong = client.put(url, **auth)
    assert wrong.status_code == 405 and wrong.json()["error"] == "method_not_allowed"
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(make_buyer("api-session"))
    assert strict.post(url).status_code == 403  # a session's write needs its CSRF token
    assert not Reminder.objects.exists()


def test_a_sent_reminder_is_not_forgotten_and_its_email_links_the_start_as_ics() -> None:
    # given a buyer who asked through the API, and the drop opened
    auth = bearer("ics-reader")
    drop = make_drop(quantity=5, starts_at=timezone.now() + timedelta(hours=1), title="Dawn; Dusk, 2 of 2")
    url = f"/api/drops/{drop.slug}/reminder"
    assert Client().post(url, **auth).status_code == 201
    Drop.objects.filter(pk=drop.pk).update(starts_at=Now() - timedelta(seconds=1))
    drop.refresh_from_db()

    # when the duty and the relay run
    assert reminders.send_due_reminders() == 1
    assert outbox.relay_outbox() >= 1

    # then the API says it went out, and forgetting it now changes nothing
    answer = Client().delete(url, **auth).json()
    assert answer["reminded"] is True and answer["sent_at"] is not None
    # and the e-mail links the drop and its start as an .ics, which parses to the drop's start in UTC
    (mail,) = [m for m in sent_mail.outbox if m.to == ["ics-reader@example.com"]]
    base = settings.PUBLIC_BASE_URL.rstrip("/")
    assert mail.subject == "[Floodgate] Dawn; Dusk, 2 of 2 is on sale now"
    assert f"{base}/drops/{drop.slug}/" in mail.body
    (link,) = re.findall(rf"{re.escape(base)}(/\S*\.ics)", str(mail.body))
    fetched = Client().get(link)
    assert fetched.status_code == 200 and fetched["Content-Type"] == "text/calendar; charset=utf-8"
    text = fetched.content.decode()
    assert text.startswith("BEGIN:VCALENDAR\r\n") and text.endswith("END:VEVENT\r\nEND:VCALENDAR\r\n")
    event = unfolded(text)
    assert event["DTSTART"] == f"{drop.starts_at.astimezone(UTC):%Y%m%dT%H%M%SZ}"
    assert event["DTEND"] > event["DTSTART"] and event["DTSTAMP"].endswith("Z")
    assert event["SUMMARY"] == "Dawn\\; Dusk\\, 2 of 2 goes on sale"
    assert event["URL"] == f"{base}/drops/{drop.slug}/"
    # and a calendar library reads the same event: the start, the title unescaped, the link
    (parsed,) = icalendar.Calendar.from_ical(fetched.content).walk("VEVENT")
    assert parsed.decoded("DTSTART") == drop.starts_at.astimezone(UTC).replace(microsecond=0)
    assert str(parsed["SUMMARY"]) == "Dawn; Dusk, 2 of 2 goes on sale"
    assert str(parsed["URL"]) == f"{base}/drops/{drop.slug}/"
