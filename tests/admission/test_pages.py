"""The waiting-room page and the drop page's way into it (Django's test client, real PostgreSQL)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from admission import services
from admission.models import Ticket
from holds.models import Hold
from tests.factories import make_buyer, make_drop

pytestmark = pytest.mark.django_db


def logged_in(name: str) -> Client:
    client = Client()
    client.force_login(make_buyer(name))
    return client


def hidden(name: str, html: str) -> str:
    found = re.search(rf'name="{name}"[^>]*value="([^"]*)"', html)
    assert found, f"no hidden {name} in the page"
    return found.group(1)


def test_the_page_needs_a_login_and_keeps_the_next_address() -> None:
    make_drop(slug="wr-login", waiting_room=True)

    answer = Client().get("/drops/wr-login/queue/")

    assert answer.status_code == 302
    assert answer["Location"].startswith("/accounts/login/?next=/drops/wr-login/queue/")
    assert not Ticket.objects.exists()


@pytest.mark.parametrize(
    "path",
    [
        "/drops/no-such-drop/queue/",
        "/drops/NOT_A_SLUG/queue/",
        "/drops/" + "x" * 500 + "/queue/",
        "/drops/%00%ff/queue/",
        "/drops/a/b/queue/",
    ],
)
def test_unknown_or_garbage_drops_are_404(path: str) -> None:
    make_drop(slug="wr-real", waiting_room=True)

    answer = logged_in("gus").get(path)

    assert answer.status_code == 404
    assert not Ticket.objects.exists()


def test_a_drop_without_a_waiting_room_sends_the_buyer_to_the_drop_page() -> None:
    make_drop(slug="wr-none", waiting_room=False)

    answer = logged_in("nora").get("/drops/wr-none/queue/")

    assert answer.status_code == 302 and answer["Location"] == "/drops/wr-none/"
    assert not Ticket.objects.exists()


def test_a_get_never_puts_anyone_in_line_a_post_does() -> None:
    drop = make_drop(slug="wr-post", waiting_room=True)
    client = logged_in("pete")

    looked = client.get("/drops/wr-post/queue/")
    assert looked.status_code == 200 and not Ticket.objects.exists()
    assert 'action="/drops/wr-post/queue/"' in looked.content.decode()  # the Join button's form
    joined = client.post("/drops/wr-post/queue/")

    assert joined.status_code == 302 and joined["Location"] == "/drops/wr-post/queue/"
    assert Ticket.objects.filter(drop=drop, buyer__username="pete").count() == 1
    assert client.put("/drops/wr-post/queue/").status_code == 405


def test_joining_needs_the_csrf_token_so_a_cross_site_form_cannot_enrol_a_buyer() -> None:
    make_drop(slug="wr-csrf", waiting_room=True)
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_buyer("victim"))

    forged = client.post("/drops/wr-csrf/queue/")
    token = hidden("csrfmiddlewaretoken", client.get("/drops/wr-csrf/").content.decode())
    joined = client.post("/drops/wr-csrf/queue/", {"csrfmiddlewaretoken": token})

    assert forged.status_code == 403
    assert joined.status_code == 302 and Ticket.objects.count() == 1


def test_the_page_join_is_rate_limited_like_the_api_join(settings) -> None:
    settings.RATE_LIMIT_BURST, settings.RATE_LIMIT_PER_SECOND = 2, 0.001
    make_drop(slug="wr-limit", waiting_room=True)
    client = logged_in("hammer")

    answers = [client.post("/drops/wr-limit/queue/") for _ in range(3)]

    assert [a.status_code for a in answers] == [302, 302, 429]
    assert int(answers[-1]["Retry-After"]) >= 1 and b"Too many attempts" in answers[-1].content
    assert Ticket.objects.count() == 1


def test_a_refused_join_page_joins_again_by_itself_with_what_it_sent(settings) -> None:
    settings.RATE_LIMIT_BURST, settings.RATE_LIMIT_PER_SECOND = 1, 0.001
    make_drop(slug="wr-again", waiting_room=True)
    client = logged_in("eager")
    client.post("/drops/wr-again/queue/")
    sent = {"proof": "0a1b", "challenge": "1.2.3<script>"}

    refused = client.post("/drops/wr-again/queue/", sent)

    page = refused.content.decode()
    assert refused.status_code == 429 and '<meta http-equiv="refresh"' not in page  # no reload that forgets
    form = re.search(
        r'<form method="post" action="/drops/wr-again/queue/" id="retry-join">(.*?)</form>', page, re.S
    )
    assert form and 'name="csrfmiddlewaretoken"' in form[1] and 'value="0a1b"' in form[1]
    assert 'value="1.2.3&lt;script&gt;"' in form[1]  # sent back as it came, inert
    countdown = re.search(r'data-countdown="([^"]+)" [^>]*id="retry-countdown"', page)
    assert countdown, page
    retry_at = datetime.fromisoformat(countdown[1])
    wait = (retry_at - timezone.now()).total_seconds()
    assert (
        int(refused["Retry-After"]) * 0.9 <= wait <= 2 * int(refused["Retry-After"]) + 1
    )  # spread, not in step
    assert "js/retry.js" in page


def test_joining_puts_the_buyer_in_line_once() -> None:
    drop = make_drop(slug="wr-open", quantity=2, waiting_room=True, admission_percent=100)
    services.run_wave(drop)  # the start: an empty draw, so joiners get numbers at once
    services.join(drop=drop, buyer_id=make_buyer("ahead").pk)
    client = logged_in("olga")

    first = client.post("/drops/wr-open/queue/", follow=True).content.decode()
    again = client.post("/drops/wr-open/queue/", follow=True).content.decode()

    assert Ticket.objects.filter(drop=drop).count() == 2
    for html in (first, again):
        assert 'id="ticket">#2<' in html and 'id="position">2<' in html
        assert "1 person ahead of you" in html and "2 units left" in html
        assert 'data-ws-path="/ws/drops/wr-open/queue/"' in html
        assert 'id="buy-step" aria-labelledby="buy-heading" hidden' in html
        assert hidden("admission_token", html) == ""
    assert drop.queue.seed_sha256 in first


def test_before_the_start_the_page_shows_the_entry_the_countdown_and_the_seed_hash() -> None:
    drop = make_drop(slug="wr-early", waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5))

    html = logged_in("eve").post("/drops/wr-early/queue/", follow=True).content.decode()

    ticket = Ticket.objects.get(drop=drop)
    assert ticket.number is None
    # the entry is an id that counts across drops: the page does not show it as a count ("#2")
    entry = (
        "You are in the draw: your place is drawn by the start. Your entry's id, to check the draw with: "
        f'<strong id="ticket">{ticket.pk}</strong>'
    )
    assert entry in html
    assert f'data-countdown="{drop.starts_at.isoformat()}"' in html
    assert drop.queue.seed_sha256 in html and drop.queue.seed not in html
    assert re.search(r'<p class="notice" data-when="scheduled">', html)


def test_an_admitted_buyer_gets_the_buy_step_and_reserves_with_its_token() -> None:
    drop = make_drop(slug="wr-buy", quantity=3, waiting_room=True, per_buyer_limit=2, admission_percent=100)
    services.run_wave(drop)
    client = logged_in("ada")
    client.post("/drops/wr-buy/queue/")
    services.run_wave(drop, force=True)

    html = client.get("/drops/wr-buy/queue/").content.decode()
    bought = client.post(
        "/drops/wr-buy/buy",
        {
            "quantity": "2",
            "idempotency_key": hidden("idempotency_key", html),
            "admission_token": hidden("admission_token", html),
        },
    )

    assert 'id="waiting" aria-labelledby="ticket-line" hidden' in html
    assert "It's your turn" in html and '<option value="2">' in html and '<option value="3">' not in html
    hold = Hold.objects.get(drop=drop)
    assert bought["Location"] == f"/holds/{hold.pk}/" and hold.quantity == 2


def test_buying_without_admission_sends_the_buyer_back_to_the_waiting_room() -> None:
    make_drop(slug="wr-skip", quantity=3, waiting_room=True)
    client = logged_in("cut")

    answer = client.post("/drops/wr-skip/buy", {"quantity": "1", "idempotency_key": "k"}, follow=True)

    assert answer.redirect_chain[-1][0] == "/drops/wr-skip/queue/"
    assert "You have not been admitted yet" in answer.content.decode()
    assert 'id="join-queue">Join the waiting room' in answer.content.decode()  # one click away
    assert not Ticket.objects.exists()
    assert not Hold.objects.exists()


def test_an_ended_drop_does_not_take_new_buyers_into_its_line() -> None:
    start = timezone.now() - timedelta(hours=2)
    make_drop(slug="wr-over", waiting_room=True, starts_at=start, ends_at=start + timedelta(hours=1))

    client = logged_in("late")

    looked = client.get("/drops/wr-over/queue/")
    answer = client.post("/drops/wr-over/queue/", follow=True)

    assert "waiting room is closed" in looked.content.decode() and "join-queue" not in looked.content.decode()
    assert answer.redirect_chain[-1][0] == "/drops/wr-over/"
    assert "waiting room is closed" in answer.content.decode()
    assert not Ticket.objects.exists()


def test_the_drop_page_sends_buyers_to_the_line_until_they_are_admitted() -> None:
    drop = make_drop(slug="wr-drop", quantity=1, waiting_room=True, admission_percent=100)
    services.run_wave(drop)
    first, second = logged_in("fay"), logged_in("gil")
    anonymous = Client().get("/drops/wr-drop/").content.decode()
    before = first.get("/drops/wr-drop/").content.decode()
    first.post("/drops/wr-drop/queue/")
    second.post("/drops/wr-drop/queue/")
    services.run_wave(drop, force=True)  # one unit: ticket 1 only

    admitted = first.get("/drops/wr-drop/").content.decode()
    waiting = second.get("/drops/wr-drop/").content.decode()

    assert 'href="/drops/wr-drop/queue/">Join the waiting room' in anonymous  # a link to log in first
    assert '<form method="post" action="/drops/wr-drop/queue/"' in before
    for html in (anonymous, before):
        assert "Join the waiting room" in html and 'id="buy"' not in html
    assert 'href="/drops/wr-drop/queue/">Back to your place in line' in waiting and 'id="buy"' not in waiting
    assert 'id="buy"' in admitted and "Join the waiting room" not in admitted
    bought = first.post(
        "/drops/wr-drop/buy",
        {
            "quantity": "1",
            "idempotency_key": hidden("idempotency_key", admitted),
            "admission_token": hidden("admission_token", admitted),
        },
    )
    assert bought["Location"] == f"/holds/{Hold.objects.get(drop=drop).pk}/"


def test_a_scheduled_waiting_room_drop_invites_early_joiners() -> None:
    make_drop(slug="wr-soon", waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5))

    html = Client().get("/drops/wr-soon/").content.decode()

    assert "Goes live in" in html and "Join the waiting room" in html and 'id="buy"' not in html


def test_a_browser_prefetch_does_not_put_anyone_in_line() -> None:
    drop = make_drop(slug="wr-prefetch", quantity=2, waiting_room=True)
    client = logged_in("pre")

    response = client.get("/drops/wr-prefetch/queue/", headers={"Sec-Purpose": "prefetch;prerender"})

    assert response.status_code == 200
    assert not Ticket.objects.filter(drop=drop).exists()


def test_the_drop_page_sends_a_buyer_already_in_line_back_to_their_place() -> None:
    drop = make_drop(slug="wr-back", quantity=2, waiting_room=True)
    client = logged_in("back")
    assert "Join the waiting room" in client.get("/drops/wr-back/").content.decode()

    client.post("/drops/wr-back/queue/")
    page = client.get("/drops/wr-back/").content.decode()

    assert "Back to your place in line" in page and "Join the waiting room" not in page
    assert Ticket.objects.filter(drop=drop).count() == 1
