"""A draw committed to randomness that did not exist yet: a drand round named before the first join,
the entry list's hash published before that round is due, the round's BLS signature verified.

The sales here are set on 2023-09-15, just after a real recorded quicknet round was due (the
wave is run with that `now`): the list closes 10 s before the start (the default), 2 s before that
round, so the round the queue names is the one tests/beacons.py serves, and the draw is made before
the start.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client, TestCase
from django.utils import timezone

from admission import beacon, draw, drawing, services
from admission.models import BeaconStatus, Queue, Ticket, Wave
from shop.models import DEFAULT_LINE_CLOSE_SECONDS, Drop
from tests import beacons
from tests.factories import make_buyer, make_drop

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

pytestmark = pytest.mark.django_db

DUE = beacon.QUICKNET.time_of(beacons.QUICKNET_ROUND)  # 2023-09-15 11:00:03 UTC
CLOSES = DUE - timedelta(seconds=2)  # the list closes; the round named is due 2 s later
STARTS = CLOSES + timedelta(seconds=DEFAULT_LINE_CLOSE_SECONDS)  # the sale's start: 8 s after the round


def recorded_sale(make_buyers, *, slug: str, n: int = 30, **options: Any) -> Drop:
    drop = make_drop(
        slug=slug,
        quantity=5,
        waiting_room=True,
        starts_at=STARTS,
        ends_at=timezone.now() + timedelta(hours=1),
        **options,
    )
    drawing.open_queues([drop], now=STARTS - timedelta(minutes=10))  # the tick, an hour ahead
    for buyer in make_buyers(n, prefix=f"{slug}-"):
        services.join(drop=drop, buyer_id=buyer)
    return drop


def wave(drop: Drop, at: datetime) -> Wave | None:
    with TestCase.captureOnCommitCallbacks(execute=True):
        return services.run_wave(Drop.objects.get(pk=drop.pk), now=at)


def published(slug: str) -> dict[str, Any]:
    answer = Client().get(f"/api/drops/{slug}/queue/draw")
    assert answer.status_code == 200
    return answer.json()


def drawn(drop: Drop) -> bool:
    return Queue.objects.get(pk=drop.pk).drawn_at is not None


def verify(slug: str, *args: str) -> int:
    try:
        call_command("verify_draw", slug, *args)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    return 0


def test_the_recorded_round_verifies_against_the_chains_public_keys() -> None:
    quick = beacon.Round(number=beacons.QUICKNET_ROUND, signature=beacons.QUICKNET_SIGNATURE)
    main = beacon.Round(
        number=beacons.MAINNET_ROUND,
        signature=beacons.MAINNET_SIGNATURE,
        previous_signature=beacons.MAINNET_PREVIOUS_SIGNATURE,
    )
    assert beacon.randomness(beacon.QUICKNET, quick) == beacons.QUICKNET_RANDOMNESS
    assert beacon.randomness(beacon.MAINNET, main) == beacons.MAINNET_RANDOMNESS
    with pytest.raises(beacon.BadRound):
        beacon.randomness(beacon.QUICKNET, beacon.Round(quick.number + 1, quick.signature))  # another round's
    with pytest.raises(beacon.BadRound):
        beacon.randomness(beacon.QUICKNET, beacon.Round(quick.number, beacons.forged(quick.signature)))
    with pytest.raises(beacon.BadRound):
        beacon.randomness(beacon.MAINNET, beacon.Round(main.number, main.signature, main.signature))


def test_a_draw_with_a_recorded_real_round_is_published_and_verifies(
    make_buyers, drand_relay, capsys
) -> None:
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.QUICKNET_SIGNATURE)
    drop = recorded_sale(make_buyers, slug="drand")
    before = published("drand")
    assert before["beacon_round"] == beacons.QUICKNET_ROUND and before["beacon_status"] == "waiting"
    assert before["beacon_chain"] == beacon.QUICKNET.hash and "entries_sha256" not in before

    # when: the tick at the close closes the list; the round is not due yet, so nothing is drawn
    assert wave(drop, CLOSES + timedelta(milliseconds=500)) is None
    closed = published("drand")
    assert closed["drawn"] is False and closed["entries_sha256"] and "order" not in closed
    assert closed["unsteerable"] is False
    assert Ticket.objects.filter(drop=drop, number__isnull=False).count() == 0
    assert drand_relay.asked == []  # nothing asked before the round's time
    # ... the tick after the round's time reads it, checks it and draws, before the start
    assert wave(drop, DUE + timedelta(seconds=1)) is None and drawn(drop)
    assert Queue.objects.get(pk=drop.pk).admitted_through == 0  # nobody in before the start
    # ... and the start's wave admits at once
    first = wave(drop, STARTS)
    assert first is not None and first.admitted > 0
    body = published("drand")

    # then: the round's randomness is mixed in, the entry list is the one whose hash came first
    assert body["beacon_status"] == "verified" and body["beacon"] == beacons.QUICKNET_RANDOMNESS
    assert body["beacon_signature"] == beacons.QUICKNET_SIGNATURE
    assert body["entries_sha256"] == closed["entries_sha256"] == draw.entries_digest(body["entries"])
    assert body["order"] == draw.draw_order(body["seed"], body["entries"], beacon=beacons.QUICKNET_RANDOMNESS)
    assert body["order"] != draw.draw_order(body["seed"], body["entries"])  # the round changes it
    assert body["order"] == list(
        Ticket.objects.filter(drop=drop).order_by("number").values_list("id", flat=True)
    )
    assert draw.check(body) == []
    assert body["unsteerable"] is True and "nobody, the shop included" in body["trust"]
    assert verify("drand") == 0
    assert "drand round 657413 verified" in capsys.readouterr().out


def test_a_forged_round_signature_is_refused_by_the_draw_and_by_verify_draw(
    make_buyers, drand_relay, tmp_path: Path, capsys
) -> None:
    # given: a relay that answers with a signature one digit off (well-formed, not the chain's)
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.forged(beacons.QUICKNET_SIGNATURE))
    drop = recorded_sale(make_buyers, slug="forged")
    wave(drop, CLOSES)
    wave(drop, DUE + timedelta(seconds=1))
    assert not drawn(drop)  # asked again until the start: another relay may answer
    wave(drop, STARTS)
    body = published("forged")
    # then: the draw took nothing it could not verify, and says so
    assert body["beacon_status"] == "unreachable" and body["beacon"] == "" and body["beacon_signature"] == ""
    assert "does not verify" in body["beacon_note"]
    assert body["order"] == draw.draw_order(body["seed"], body["entries"])
    assert body["unsteerable"] is False and "trust the shop" in body["trust"]
    assert verify("forged") == 3
    out = capsys.readouterr().out
    assert "NOTE: the beacon round 657413 could not be read" in out and "SEED ONLY" in out

    # and a published draw whose signature (with the order recomputed from it) was forged afterwards
    honest = dict(body, beacon_status="verified", beacon_signature=beacons.QUICKNET_SIGNATURE)
    honest["beacon"] = beacons.QUICKNET_RANDOMNESS
    honest["order"] = draw.draw_order(body["seed"], body["entries"], beacon=beacons.QUICKNET_RANDOMNESS)
    fake_signature = beacons.forged(beacons.QUICKNET_SIGNATURE)
    fake = dict(honest, beacon_signature=fake_signature)
    fake["beacon"] = hashlib.sha256(bytes.fromhex(fake_signature)).hexdigest()
    fake["order"] = draw.draw_order(body["seed"], body["entries"], beacon=fake["beacon"])
    (tmp_path / "honest.json").write_text(json.dumps(honest))
    (tmp_path / "fake.json").write_text(json.dumps(fake))
    assert verify("forged", "--json", str(tmp_path / "honest.json")) == 0
    assert verify("forged", "--json", str(tmp_path / "fake.json")) == 1
    assert "signature does not verify against quicknet's public key" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("change", "caught"),
    [
        ({"seed": "f" * 64}, "seed does not hash"),
        ("drop the last entry", "entry list does not hash"),
        ({"beacon_round": beacons.QUICKNET_ROUND + 1}, "signature does not verify"),
        ({"entries_closed_at": DUE.isoformat()}, "did not close before round"),
    ],
)
def test_a_changed_seed_entry_list_or_round_is_detected(
    make_buyers, drand_relay, tmp_path: Path, capsys, change: object, caught: str
) -> None:
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.QUICKNET_SIGNATURE)
    drop = recorded_sale(make_buyers, slug="tampered", n=12)
    wave(drop, CLOSES)
    wave(drop, DUE + timedelta(seconds=1))
    body = published("tampered")
    edited = dict(body, **change) if isinstance(change, dict) else dict(body, entries=body["entries"][:-1])
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    assert verify("tampered", "--json", str(tmp_path / "edited.json")) == 1
    assert caught in capsys.readouterr().err


def test_an_unreachable_beacon_falls_back_to_the_committed_seed_and_does_not_pass_as_verified(
    make_buyers, settings, capsys
) -> None:
    settings.DRAW_BEACON = "quicknet"
    settings.DRAW_BEACON_URLS = ["http://127.0.0.1:9"]  # nothing listens: as api.drand.sh from here
    drop = recorded_sale(make_buyers, slug="offline", n=10)
    wave(drop, CLOSES)
    assert wave(drop, DUE + timedelta(seconds=1)) is None and not drawn(drop)  # retried first
    assert wave(drop, STARTS) is not None  # the line is not held up past the start
    body = published("offline")
    assert body["beacon_status"] == "unreachable" and body["beacon"] == "" and body["beacon_note"]
    assert body["order"] == draw.draw_order(body["seed"], body["entries"])
    assert draw.check(body) == []  # it adds up ...
    assert body["unsteerable"] is False  # ... and says what that does not prove
    assert "could have added made-up entries" in body["trust"]

    # verify_draw: its own exit code, and the words
    assert verify("offline") == 3
    out = capsys.readouterr().out
    assert "rests on the committed seed" in out
    assert "SEED ONLY, not verified as unsteerable" in out and "Here you have to trust the shop" in out
    assert "verified:" not in out

    # the pages, and the JSON in German
    client = Client()
    client.force_login(get_user_model().objects.get(username="offline-0"))
    page = client.get("/drops/offline/queue/verify").content.decode()
    assert "could not be read" in page and str(beacons.QUICKNET_ROUND) in page
    assert "cannot show that the shop did not steer it" in page
    german = client.get("/api/drops/offline/queue/draw", HTTP_ACCEPT_LANGUAGE="de").json()
    assert german["unsteerable"] is False and "vertrauen" in german["trust"]
    assert client.get("/api/drops/offline/queue/draw").json()["trust"] == body["trust"]  # kept per language
    seite = client.get("/drops/offline/queue/verify", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "vertrauen" in seite


def test_a_relay_that_fails_at_the_due_time_is_asked_again_before_any_fallback(
    make_buyers, drand_relay, settings
) -> None:
    # given: at the round's time no relay answers (refused, as a blip would)
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.QUICKNET_SIGNATURE)
    working = settings.DRAW_BEACON_URLS
    settings.DRAW_BEACON_URLS = ["http://127.0.0.1:9"]
    drop = recorded_sale(make_buyers, slug="blip", n=6)
    wave(drop, CLOSES)
    assert wave(drop, DUE + timedelta(seconds=1)) is None and not drawn(drop)
    assert wave(drop, DUE + timedelta(seconds=2)) is None and not drawn(drop)
    # when: the relay answers again, still before the start
    settings.DRAW_BEACON_URLS = working
    wave(drop, DUE + timedelta(seconds=3))
    # then: the draw is tied to the round
    assert published("blip")["beacon_status"] == "verified" and drawn(drop)


def test_control_past_the_retries_the_same_blip_falls_back(make_buyers, settings) -> None:
    settings.DRAW_BEACON = "quicknet"
    settings.DRAW_BEACON_URLS = ["http://127.0.0.1:9"]
    drop = recorded_sale(make_buyers, slug="blip-late", n=6)
    wave(drop, CLOSES)
    wave(drop, STARTS + timedelta(seconds=1))
    assert published("blip-late")["beacon_status"] == "unreachable"


def test_a_draw_told_to_wait_waits_for_its_round_then_falls_back_at_the_limit(
    make_buyers, drand_relay, settings
) -> None:
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.QUICKNET_SIGNATURE)
    working = settings.DRAW_BEACON_URLS
    settings.DRAW_BEACON_URLS = ["http://127.0.0.1:9"]
    waits = recorded_sale(make_buyers, slug="waits", n=6, draw_round_wait_seconds=60)
    gives_up = recorded_sale(make_buyers, slug="gives-up", n=6, draw_round_wait_seconds=60)
    for drop in (waits, gives_up):
        wave(drop, CLOSES)
        # past the start the line waits: no draw, nobody admitted
        assert wave(drop, STARTS + timedelta(seconds=30)) is None and not drawn(drop)
    # the round comes back within the limit: a verified draw, then the first wave
    settings.DRAW_BEACON_URLS = working
    assert wave(waits, STARTS + timedelta(seconds=40)) is not None
    assert published("waits")["beacon_status"] == "verified"
    # never within the limit: at it, the draw on the seed alone, said so
    settings.DRAW_BEACON_URLS = ["http://127.0.0.1:9"]
    assert wave(gives_up, STARTS + timedelta(seconds=59)) is None and not drawn(gives_up)
    assert wave(gives_up, STARTS + timedelta(seconds=60)) is not None
    assert published("gives-up")["beacon_status"] == "unreachable"
    assert published("gives-up")["unsteerable"] is False


def test_joins_after_the_close_wait_behind_the_closed_list_in_arrival_order(make_buyers, drand_relay) -> None:
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.QUICKNET_SIGNATURE)
    drop = recorded_sale(make_buyers, slug="late", n=8)
    client = Client()
    client.force_login(make_buyer("late-reader"))
    # before the close, the page names it and says what a later join means
    before = client.get("/drops/late/queue/").content.decode()
    assert "Everyone who joins before <strong>" in before and "seconds before the start" in before
    assert "Whoever joins after that is placed behind all of them, in the order they arrive" in before
    wave(drop, CLOSES)
    # before the start, after the close: the page says where they will stand, before they join
    answer = client.get("/drops/late/queue/")
    assert answer.status_code == 200
    page = answer.content.decode()
    assert "The line closed at" in page
    assert "placed behind everyone in the draw, in the order you arrive" in page
    late = [services.join(drop=drop, buyer_id=b).ticket for b in make_buyers(3, prefix="late-after-")]
    wave(drop, DUE + timedelta(seconds=1))
    assert [t.number for t in late] == [9, 10, 11]  # not in the draw, after everyone in it, as they came
    assert Queue.objects.get(pk=drop.pk).drawn_entries == 8
    assert sorted(published("late")["order"]) == sorted(
        Ticket.objects.filter(drop=drop, number__lte=8).values_list("id", flat=True)
    )


def staff() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-pw-pw-pw"))
    return client


def admin_post(client: Client, drop: Drop, starts_at: datetime | None = None, **changes: str) -> TestResponse:
    url = f"/admin/shop/drop/{drop.pk}/change/"
    context = client.get(url).context
    form = context["adminform"].form
    data = {name: field.widget.format_value(form.initial.get(name)) for name, field in form.fields.items()}
    for inline in context["inline_admin_formsets"]:  # the variants' rows, posted back as they are
        formset = inline.formset
        data |= {f"{formset.prefix}-{k}": v for k, v in formset.management_form.initial.items()}
        for row in formset.initial_forms:
            data |= {row.add_prefix(name): row.initial.get(name) for name in row.fields}
    starts = starts_at or drop.starts_at
    data |= {
        "product": drop.product_id,
        "starts_at_0": starts.strftime("%Y-%m-%d"),
        "starts_at_1": starts.strftime("%H:%M:%S"),
        "ends_at_0": drop.ends_at.strftime("%Y-%m-%d"),
        "ends_at_1": drop.ends_at.strftime("%H:%M:%S"),
        "waiting_room": "on",
        **changes,
    }
    data = {k: v for k, v in data.items() if v is not None and v is not False}
    with TestCase.captureOnCommitCallbacks(execute=True):
        return client.post(url, data)


@pytest.mark.django_db(transaction=True)
def test_the_round_follows_the_start_until_the_first_join_then_nothing_changes_it(
    settings, make_buyers
) -> None:
    settings.DRAW_BEACON = "quicknet"
    starts = (timezone.now() + timedelta(minutes=30)).replace(microsecond=0)
    drop = make_drop(slug="fixed", waiting_room=True, starts_at=starts, ends_at=starts + timedelta(hours=2))
    drawing.open_queues([drop])
    client = staff()
    named = Queue.objects.get(pk=drop.pk).beacon_round
    closes = starts - timedelta(seconds=DEFAULT_LINE_CLOSE_SECONDS)
    assert named == beacon.QUICKNET.round_at(closes + beacon.CLOSE_MARGIN)
    assert beacon.QUICKNET.time_of(named) <= starts - timedelta(seconds=5)  # due well before the start

    # before anyone joined, moving the start moves the round with it
    later = starts + timedelta(minutes=10)
    assert admin_post(client, drop, starts_at=later).status_code == 302
    moved = Queue.objects.get(pk=drop.pk).beacon_round
    assert moved == beacon.QUICKNET.round_at(later - (starts - closes) + beacon.CLOSE_MARGIN) == named + 200

    # ... and so does an earlier close
    assert admin_post(client, Drop.objects.get(pk=drop.pk), line_close_seconds="30").status_code == 302
    moved = Queue.objects.get(pk=drop.pk).beacon_round
    assert moved == beacon.QUICKNET.round_at(later - timedelta(seconds=30) + beacon.CLOSE_MARGIN)

    # after the first join: the admin shows it, read-only; a moved start or a posted value changes nothing
    services.join(drop=Drop.objects.get(pk=drop.pk), buyer_id=make_buyers(1, prefix="first-")[0])
    page = client.get(f"/admin/shop/drop/{drop.pk}/change/").content.decode()
    assert f"round <code>{moved}</code>" in page and "fixed: people have joined" in page
    assert 'name="draw_commitment"' not in page and 'name="beacon_round"' not in page
    answer = admin_post(
        client, Drop.objects.get(pk=drop.pk), starts_at=later + timedelta(minutes=5), beacon_round="1"
    )
    assert answer.status_code == 302
    assert Queue.objects.get(pk=drop.pk).beacon_round == moved
    # and the API has no way to write it: the draw's resource is read-only
    buyer = client
    for method in ("post", "put", "patch", "delete"):
        assert getattr(buyer, method)("/api/drops/fixed/queue/draw", {"beacon_round": 1}).status_code == 405
    assert published("fixed")["beacon_round"] == moved
    assert Queue.objects.get(pk=drop.pk).beacon_status == BeaconStatus.WAITING


def test_a_close_that_runs_late_never_uses_a_round_already_public(make_buyers, drand_relay) -> None:
    # given: no process closed the list on time; the first tick comes after the named round's time
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.QUICKNET_SIGNATURE)
    drop = recorded_sale(make_buyers, slug="late-close", n=5)
    wave(drop, DUE + timedelta(milliseconds=500))
    # then: the list closed names the first round due after the close, and says why
    queue = Queue.objects.get(pk=drop.pk)
    assert queue.entries_closed_at == DUE + timedelta(milliseconds=500)
    assert queue.beacon_round == beacons.QUICKNET_ROUND + 1
    assert beacon.QUICKNET.time_of(queue.beacon_round) > queue.entries_closed_at
    assert "the close ran late" in queue.beacon_note
    assert not drawn(drop) and drand_relay.asked == []  # the public round 657413 is never read


def test_control_a_close_on_time_keeps_the_round_named_before_the_first_join(
    make_buyers, drand_relay
) -> None:
    drop = recorded_sale(make_buyers, slug="on-time", n=5)
    wave(drop, CLOSES)
    assert Queue.objects.get(pk=drop.pk).beacon_round == beacons.QUICKNET_ROUND
