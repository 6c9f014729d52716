"""A draw committed to randomness that did not exist yet: a drand round named before the first join,
the entry list's hash published before that round is due, the round's BLS signature verified.

The sales here are set on 2023-09-15, just before a real recorded quicknet round was due (the
wave is run with that `now`), so the round the queue names is the one tests/beacons.py serves.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client, TestCase
from django.utils import timezone

from admission import beacon, draw, drawing, services
from admission.models import BeaconStatus, Queue, Ticket
from shop.models import Drop
from tests import beacons
from tests.factories import make_drop

pytestmark = pytest.mark.django_db

DUE = beacon.QUICKNET.time_of(beacons.QUICKNET_ROUND)  # 2023-09-15 11:00:03 UTC
STARTS = DUE - timedelta(seconds=2)  # the sale's start: the list closes then, the round is due after


def recorded_sale(make_buyers, *, slug: str, n: int = 30) -> Drop:
    drop = make_drop(
        slug=slug,
        quantity=5,
        waiting_room=True,
        starts_at=STARTS,
        ends_at=timezone.now() + timedelta(hours=1),
    )
    drawing.open_queues([drop], now=STARTS - timedelta(minutes=10))  # the tick, an hour ahead
    for buyer in make_buyers(n, prefix=f"{slug}-"):
        services.join(drop=drop, buyer_id=buyer)
    return drop


def wave(drop: Drop, at: datetime) -> object:
    with TestCase.captureOnCommitCallbacks(execute=True):
        return services.run_wave(Drop.objects.get(pk=drop.pk), now=at)


def published(slug: str) -> dict[str, object]:
    answer = Client().get(f"/api/drops/{slug}/queue/draw")
    assert answer.status_code == 200
    return answer.json()


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

    # when: the start's wave closes the list; the round is not due yet, so nobody is admitted
    assert wave(drop, STARTS + timedelta(milliseconds=500)) is None
    closed = published("drand")
    assert closed["drawn"] is False and closed["entries_sha256"] and "order" not in closed
    assert Ticket.objects.filter(drop=drop, number__isnull=False).count() == 0
    assert drand_relay.asked == []  # nothing asked before the round's time
    # ... and the round's wave reads it, checks it and draws
    assert wave(drop, DUE + timedelta(seconds=1)) is not None
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
    assert verify("drand") == 0
    assert "drand round 657413 verified" in capsys.readouterr().out


def test_a_forged_round_signature_is_refused_by_the_draw_and_by_verify_draw(
    make_buyers, drand_relay, tmp_path: Path, capsys
) -> None:
    # given: a relay that answers with a signature one digit off (well-formed, not the chain's)
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.forged(beacons.QUICKNET_SIGNATURE))
    drop = recorded_sale(make_buyers, slug="forged")
    wave(drop, STARTS)
    wave(drop, DUE + timedelta(seconds=1))
    body = published("forged")
    # then: the draw took nothing it could not verify, and says so
    assert body["beacon_status"] == "unreachable" and body["beacon"] == "" and body["beacon_signature"] == ""
    assert "does not verify" in body["beacon_note"]
    assert body["order"] == draw.draw_order(body["seed"], body["entries"])
    assert (
        verify("forged") == 0 and "NOTE: the beacon round 657413 could not be read" in capsys.readouterr().out
    )

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
    wave(drop, STARTS)
    wave(drop, DUE + timedelta(seconds=1))
    body = published("tampered")
    edited = dict(body, **change) if isinstance(change, dict) else dict(body, entries=body["entries"][:-1])
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    assert verify("tampered", "--json", str(tmp_path / "edited.json")) == 1
    assert caught in capsys.readouterr().err


def test_an_unreachable_beacon_falls_back_to_the_committed_seed_and_says_so(
    make_buyers, settings, capsys
) -> None:
    settings.DRAW_BEACON = "quicknet"
    settings.DRAW_BEACON_URLS = ["http://127.0.0.1:9"]  # nothing listens: as api.drand.sh from here
    drop = recorded_sale(make_buyers, slug="offline", n=10)
    wave(drop, STARTS)
    assert wave(drop, DUE + timedelta(seconds=1)) is not None  # the line is not held up
    body = published("offline")
    assert body["beacon_status"] == "unreachable" and body["beacon"] == "" and body["beacon_note"]
    assert body["order"] == draw.draw_order(body["seed"], body["entries"])
    assert draw.check(body) == []
    assert verify("offline") == 0 and "rests on the committed seed" in capsys.readouterr().out
    client = Client()
    client.force_login(get_user_model().objects.get(username="offline-0"))
    page = client.get("/drops/offline/queue/verify").content.decode()
    assert "could not be read" in page and str(beacons.QUICKNET_ROUND) in page


def test_joins_after_the_close_wait_behind_the_closed_list(make_buyers, drand_relay) -> None:
    drand_relay.serve(beacon.QUICKNET, beacons.QUICKNET_ROUND, beacons.QUICKNET_SIGNATURE)
    drop = recorded_sale(make_buyers, slug="late", n=8)
    wave(drop, STARTS)
    late = [services.join(drop=drop, buyer_id=b).ticket for b in make_buyers(3, prefix="late-after-")]
    wave(drop, DUE + timedelta(seconds=1))
    assert sorted(t.number for t in late) == [9, 10, 11]  # not in the draw, after everyone in it
    assert Queue.objects.get(pk=drop.pk).drawn_entries == 8
    assert sorted(published("late")["order"]) == sorted(
        Ticket.objects.filter(drop=drop, number__lte=8).values_list("id", flat=True)
    )


def staff() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", password="pw-pw-pw-pw"))
    return client


def admin_post(client: Client, drop: Drop, **changes: str) -> object:
    url = f"/admin/shop/drop/{drop.pk}/change/"
    context = client.get(url).context
    form = context["adminform"].form
    data = {name: field.widget.format_value(form.initial.get(name)) for name, field in form.fields.items()}
    for inline in context["inline_admin_formsets"]:  # the variants' rows, posted back as they are
        formset = inline.formset
        data |= {f"{formset.prefix}-{k}": v for k, v in formset.management_form.initial.items()}
        for row in formset.initial_forms:
            data |= {row.add_prefix(name): row.initial.get(name) for name in row.fields}
    starts = changes.pop("starts_at", drop.starts_at)
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
    assert named == beacon.QUICKNET.round_at(starts + beacon.CLOSE_MARGIN)

    # before anyone joined, moving the start moves the round with it
    later = starts + timedelta(minutes=10)
    assert admin_post(client, drop, starts_at=later).status_code == 302
    moved = Queue.objects.get(pk=drop.pk).beacon_round
    assert moved == beacon.QUICKNET.round_at(later + beacon.CLOSE_MARGIN) == named + 200

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
