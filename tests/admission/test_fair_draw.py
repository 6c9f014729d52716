"""A draw nobody can steer: the seed committed at the queue's creation, the closed entry list's
hash mixed in, everything published, and `verify_draw` that catches tampering. (With no beacon
round named, as DRAW_BEACON="" runs it; the drand round: test_beacon_draw.py.)"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db.models import F
from django.test import Client, TestCase
from django.utils import timezone
from django_redis import get_redis_connection

from admission import draw, services, state
from admission.models import Queue, Ticket
from shop.models import Drop
from tests.factories import make_drop

pytestmark = pytest.mark.django_db


def drawn_drop(make_buyers, *, slug: str, n: int = 40) -> Drop:
    drop = make_drop(
        slug=slug, quantity=5, waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5)
    )
    for buyer in make_buyers(n, prefix=f"{slug}-"):
        services.join(drop=drop, buyer_id=buyer)
    with TestCase.captureOnCommitCallbacks(execute=True):  # the draw's map is published on commit
        services.run_wave(drop, now=drop.starts_at + timedelta(seconds=1))
    return drop


def verify(slug: str, *args: str) -> int:
    try:
        call_command("verify_draw", slug, *args)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


def test_the_seed_is_committed_when_the_queue_opens_before_anyone_joins(make_buyers) -> None:
    drop = make_drop(slug="commit", waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5))
    assert not Queue.objects.filter(pk=drop.pk).exists()
    # given: the tick of a drop starting within the hour opens its queue, nobody in line yet
    services.tick()
    committed = Client().get("/api/drops/commit/queue/draw").json()["seed_sha256"]
    assert Ticket.objects.filter(drop=drop).count() == 0
    # when: buyers join, and the tick runs again
    for buyer in make_buyers(3, prefix="commit-"):
        services.join(drop=drop, buyer_id=buyer)
    services.tick()
    # then: the seed behind the hash never changed, and the published snapshot shows it
    queue = Queue.objects.get(pk=drop.pk)
    assert queue.seed_sha256 == committed == draw.seed_digest(queue.seed)
    snapshot = state.cached("commit")
    assert snapshot is not None and snapshot["queue"]["seed_sha256"] == committed


def test_the_join_page_shows_the_commitment_before_the_buyer_joins(client, django_user_model) -> None:
    drop = make_drop(slug="commit-page", waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5))
    client.force_login(django_user_model.objects.create_user(username="looker", password="x"))
    html = client.get("/drops/commit-page/queue/").content.decode()
    assert Queue.objects.get(pk=drop.pk).seed_sha256 in html
    assert Ticket.objects.filter(drop=drop).count() == 0


def test_the_draw_publishes_the_entry_list_hash_and_the_order(make_buyers) -> None:
    drop = drawn_drop(make_buyers, slug="published")
    body = Client().get("/api/drops/published/queue/draw").json()
    queue = Queue.objects.get(pk=drop.pk)

    assert body["entries_sha256"] == draw.entries_digest(body["entries"]) == queue.entries_sha256
    assert (body["beacon"], body["beacon_status"]) == ("", "none")
    assert body["entries_closed_at"] == body["drawn_at"]  # no round to wait for: closed and drawn at once
    assert body["order"] == draw.draw_order(body["seed"], body["entries"], beacon=body["beacon"])
    assert body["order"] == list(
        Ticket.objects.filter(drop=drop).order_by("number").values_list("id", flat=True)
    )
    assert draw.check(body) == []
    # the edge's map (entry -> number) is exactly the numbering the draw stored
    published = get_redis_connection("default").hgetall(state.DRAWN.format(drop=drop.pk))
    assert {int(k): int(v) for k, v in published.items()} == dict(
        Ticket.objects.filter(drop=drop).values_list("id", "number")
    )
    # the merchant's old free-text beacon is not read any more: editing it changes nothing
    Drop.objects.filter(pk=drop.pk).update(draw_beacon="changed afterwards")
    assert Client().get("/api/drops/published/queue/draw").json() == body


def test_the_entry_list_hash_changes_the_order() -> None:
    # the same seed with one entry more: every key changes, so an added entry cannot be placed by
    # computing keys against the list without it
    entries = list(range(1, 41))
    assert (
        draw.draw_order("s", entries)[:10]
        != [e for e in draw.draw_order("s", [*entries, 41]) if e != 41][:10]
    )


def test_verify_draw_passes_an_honest_draw(make_buyers, capsys) -> None:
    drawn_drop(make_buyers, slug="honest")
    # without a drand round it adds up, and still does not pass as verified (exit 3, in words)
    assert verify("honest") == 3
    out = capsys.readouterr().out
    assert "SEED ONLY, not verified as unsteerable: 40 entries" in out and "add up" in out
    assert "NOTE: no beacon round was named" in out and "Here you have to trust the shop" in out


def test_verify_draw_fails_a_seed_swapped_after_the_commitment(make_buyers, capsys) -> None:
    drop = drawn_drop(make_buyers, slug="swapped-seed")
    Queue.objects.filter(pk=drop.pk).update(seed="f" * 64)
    assert verify("swapped-seed") == 1
    assert "seed does not hash" in capsys.readouterr().err


def test_verify_draw_fails_an_entry_added_to_the_closed_list(make_buyers, capsys) -> None:
    drop = drawn_drop(make_buyers, slug="added")
    # an insider's entry slipped in at place 1 after the draw: the others move down one
    extra = make_buyers(1, prefix="insider")[0]
    Ticket.objects.filter(drop=drop).update(number=F("number") + 1000)
    Ticket.objects.filter(drop=drop).update(number=F("number") - 999)
    Ticket.objects.create(drop=drop, buyer_id=extra, number=1)
    Queue.objects.filter(pk=drop.pk).update(drawn_entries=41)
    assert verify("added") == 1
    assert "entry list does not hash" in capsys.readouterr().err


def test_verify_draw_fails_swapped_places(make_buyers, capsys) -> None:
    drop = drawn_drop(make_buyers, slug="swapped")
    first, second = Ticket.objects.filter(drop=drop, number__in=(1, 2)).order_by("number")
    Ticket.objects.filter(pk=first.pk).update(number=1000)
    Ticket.objects.filter(pk=second.pk).update(number=1)
    Ticket.objects.filter(pk=first.pk).update(number=2)
    assert verify("swapped") == 1
    assert "not the order the rule gives" in capsys.readouterr().err


def test_verify_draw_reads_a_published_json_file_and_catches_an_edit(make_buyers, tmp_path: Path) -> None:
    drawn_drop(make_buyers, slug="from-file")
    body = Client().get("/api/drops/from-file/queue/draw").json()
    honest = tmp_path / "honest.json"
    honest.write_text(json.dumps(body))
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps({**body, "entries": body["entries"][:-1]}))
    assert verify("from-file", "--json", str(honest)) == 3  # adds up; on the seed alone, so not 0
    assert verify("from-file", "--json", str(tampered)) == 1


def test_verify_draw_before_the_draw_has_nothing_to_check() -> None:
    make_drop(slug="undrawn", waiting_room=True, starts_at=timezone.now() + timedelta(minutes=5))
    assert verify("undrawn") == 2
