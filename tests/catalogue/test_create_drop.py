from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction

from inventory.models import StockBucket, Unit
from shop.models import Drop, Product
from tests.factories import make_drop

pytestmark = pytest.mark.django_db


def run(*args: str) -> dict[str, Any]:
    from io import StringIO

    out = StringIO()
    call_command("create_drop", *args, stdout=out)
    return json.loads(out.getvalue())


def test_create_drop_splits_quantity_over_buckets() -> None:
    result = run("--slug", "spring-drop", "--quantity", "10", "--buckets", "4", "--starts-in", "30")

    drop = Drop.objects.get(slug="spring-drop")
    assert result["slug"] == "spring-drop"
    assert sorted(StockBucket.objects.filter(drop=drop).values_list("available", flat=True)) == [2, 2, 3, 3]
    assert drop.state == "scheduled"


def test_create_drop_sets_how_long_an_offer_waits() -> None:
    run("--slug", "offers", "--quantity", "3", "--waiting-room", "--offer-seconds", "20")

    assert Drop.objects.get(slug="offers").offer_seconds == 20


def test_create_drop_sets_when_the_line_closes_and_how_long_the_draw_waits_for_its_round() -> None:
    result = run(
        "--slug", "timed", "--quantity", "3", "--waiting-room",
        "--line-close-seconds", "30", "--draw-round-wait-seconds", "120",
    )  # fmt: skip

    drop = Drop.objects.get(slug="timed")
    assert (drop.line_close_seconds, drop.draw_round_wait_seconds) == (30, 120)
    assert (result["line_close_seconds"], result["draw_round_wait_seconds"]) == (30, 120)
    assert Drop.objects.get(slug=run("--slug", "default", "--quantity", "1")["slug"]).line_close_seconds == 10


def test_create_drop_opens_a_face_value_exchange_after_the_end() -> None:
    result = run(
        "--slug", "resold", "--quantity", "3", "--waiting-room", "--exchange-for", "86400",
        "--exchange-fee-minor", "150",
    )  # fmt: skip

    drop = Drop.objects.get(slug="resold")
    assert drop.exchange_closes_at == drop.ends_at + timedelta(days=1)
    assert (drop.exchange_fee_minor, result["exchange_fee_minor"]) == (150, 150)
    assert result["exchange_closes_at"] == drop.exchange_closes_at.isoformat()
    assert run("--slug", "plain", "--quantity", "1")["exchange_closes_at"] is None


def test_create_drop_in_units_mode_makes_one_row_per_unit() -> None:
    run("--slug", "seats", "--quantity", "3", "--mode", "units", "--labels", "A1,A2,A3")

    assert list(Unit.objects.order_by("rank").values_list("label", "state")) == [
        ("A1", "available"),
        ("A2", "available"),
        ("A3", "available"),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--slug", "Bad Slug!", "--quantity", "5"], "lower-case letters"),
        (["--slug", "zero", "--quantity", "0"], "at least 1"),
        (["--slug", "negative", "--quantity", "-5"], "at least 1"),
        (
            ["--slug", "backwards", "--quantity", "5", "--starts-in", "100", "--ends-in", "50"],
            "end after it starts",
        ),
        (["--slug", "too-many-buckets", "--quantity", "3", "--buckets", "5"], "at most as many buckets"),
        (["--slug", "short-hold", "--quantity", "3", "--hold-seconds", "1"], "hold"),
        (["--slug", "short-offer", "--quantity", "3", "--waiting-room", "--offer-seconds", "5"], "offer"),
        (["--slug", "labels", "--quantity", "3", "--mode", "units", "--labels", "A1,A1,A2"], "unique"),
        (["--slug", "eur", "--quantity", "3", "--currency", "eur"], "three-letter"),
        (["--slug", "p0", "--quantity", "3", "--presale-in", "0"], "at least 1"),
        (["--slug", "p-room", "--quantity", "3", "--presale-in", "60", "--waiting-room"], "first-come"),
        (["--slug", "p-codes", "--quantity", "3", "--presale-codes", "5"], "needs a presale"),
        (
            ["--slug", "p-many", "--quantity", "3", "--presale-in", "9", "--presale-codes", "99999"],
            "1 to 10000",
        ),
        (["--slug", "p-neg", "--quantity", "3", "--presale-in", "9", "--presale-codes", "-1"], "1 to 10000"),
        (["--slug", "close", "--quantity", "3", "--waiting-room", "--line-close-seconds", "601"], "600"),
        (["--slug", "waits", "--quantity", "3", "--waiting-room", "--draw-round-wait-seconds", "601"], "600"),
        (["--slug", "close-neg", "--quantity", "3", "--line-close-seconds", "-1"], "0"),
        (["--slug", "ex-first-come", "--quantity", "3", "--exchange-for", "3600"], "needs the waiting room"),
        (["--slug", "ex-zero", "--quantity", "3", "--waiting-room", "--exchange-for", "0"], "at least 1"),
        (
            [
                "--slug",
                "ex-fee",
                "--quantity",
                "3",
                "--waiting-room",
                "--exchange-for",
                "9",
                "--exchange-fee-minor",
                "-1",
            ],
            "exchange_fee_minor",
        ),
    ],
)
def test_create_drop_refuses_bad_input_and_writes_nothing(args: list[str], message: str) -> None:
    with pytest.raises(CommandError) as error:
        run(*args)

    assert message.lower() in str(error.value).lower()
    assert Drop.objects.count() == 0
    assert Product.objects.count() == 0
    assert StockBucket.objects.count() == Unit.objects.count() == 0


def test_create_drop_refuses_a_taken_slug() -> None:
    make_drop(slug="taken")

    with pytest.raises(CommandError, match="already exists"):
        run("--slug", "taken", "--quantity", "5")


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE shop_drop SET quantity = 0",
        "UPDATE shop_drop SET ends_at = starts_at",
        "UPDATE shop_drop SET hold_seconds = 5",
        "UPDATE shop_drop SET per_buyer_limit = 0",
        "UPDATE shop_drop SET line_close_seconds = 601",
        "UPDATE shop_drop SET draw_round_wait_seconds = 601",
        "UPDATE shop_drop SET bucket_count = quantity + 1",
        "UPDATE inventory_stockbucket SET available = -1",
    ],
)
def test_schema_refuses_what_the_code_must_never_write(statement: str) -> None:
    make_drop(quantity=10, buckets=2)

    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement)


def test_create_drop_opens_a_presale_before_the_start_with_single_use_codes() -> None:
    from holds.models import PresaleCode

    made = run(
        "--slug",
        "early",
        "--quantity",
        "50",
        "--starts-in",
        "600",
        "--presale-in",
        "300",
        "--presale-codes",
        "7",
    )

    drop = Drop.objects.get(slug="early")
    assert drop.presale_starts_at is not None
    assert (drop.starts_at - drop.presale_starts_at).total_seconds() == 300
    assert made["presale_starts_at"] == drop.presale_starts_at.isoformat()
    assert sorted(made["presale_codes"]) == sorted(
        PresaleCode.objects.filter(drop=drop).values_list("code", flat=True)
    )
    assert len(made["presale_codes"]) == 7
    assert set(PresaleCode.objects.values_list("max_uses", "uses")) == {(1, 0)}
    assert run("--slug", "plain", "--quantity", "5")["presale_codes"] == []


def test_presale_codes_prints_new_codes_as_csv_and_refuses_garbage() -> None:
    from io import StringIO

    make_drop(slug="coded")
    out = StringIO()
    call_command("presale_codes", "coded", "--count", "3", "--uses", "4", stdout=out)

    header, *rows = out.getvalue().splitlines()
    assert header == "code,max_uses,uses" and len(rows) == 3 and all(r.endswith(",4,0") for r in rows)
    for args, message in [
        (["nope", "--count", "3"], "no drop called"),
        (["coded", "--count", "0"], "between 1 and"),
        (["coded", "--count", "3", "--uses", "0"], "between 1 and"),
    ]:
        with pytest.raises(CommandError, match=message):
            call_command("presale_codes", *args, stdout=StringIO())
    with pytest.raises(CommandError):
        call_command("presale_codes", "coded", "--count", "many", stdout=StringIO())
