"""bench returns: units that come back go to the next tickets in line, under a crowd, over HTTP.

    python3 floodgate.py bench returns            # 1,000 returns of a 100-unit drop
    python3 floodgate.py bench returns --quick    # 200 returns

The store runs as in production (bench/crowd.py's stack: web processes, a Celery worker and
beat, the production profile). A waiting-room drop of 100 units starts with every buyer in
line; the first 100 tickets reserve every unit over HTTP with their admission tokens. Then,
until RETURNS units have come back:

- the crowd: every buyer in line, IN_FLIGHT requests at a time, asks the queue API for a
  token and asks for a unit with it, as fast as the answers come;
- returners: release a random live hold over the API (`DELETE /api/holds/<id>`, as its buyer);
- beat: `sale.offer_returns` offers each returned unit to the next ticket, every second.

The crowd's answers are counted by status; 403 is a buyer not admitted yet (no token: the
page would keep waiting), 409 a "no" (sold out, all held).

Measured: the ticket numbers of the buyers who got the returned units, in the order they got
them, against ticket order; how many units the crowd's clicks won; how long a returned unit
waited for its next buyer (release to offer).

Baseline, in the same run on the same stack: the same drop, crowd and returners without a
waiting room, so a unit that comes back is open to any claim (the first click wins).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import random
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from bench.crowd import (
    OUT,
    ROOT,
    SLUG_PREFIX,
    Stack,
    production_env,
    quantile,
    query,
    raise_file_limit,
    retire_old_drops,
    say,
    setup_django,
)

UNITS = 100
IN_FLIGHT = 64
RETURNERS = 4
TOKEN_SECONDS = 60  # an admission token lives 120 s: the crowd asks again after half of that


@dataclass
class Run:
    name: str
    room: bool
    returns: int = 0
    seconds: float = 0.0
    crowd_requests: int = 0
    crowd_statuses: dict[int, int] = field(default_factory=dict)
    received: list[int] = field(default_factory=list)  # ticket numbers, in the order they got a unit
    waits: list[float] = field(default_factory=list)  # release to offer, seconds (the room only)
    drift: int = 0

    @property
    def crowd_won(self) -> int:
        return self.crowd_statuses.get(201, 0)

    @property
    def in_order(self) -> int:
        """How many receivers are exactly the ticket their position in line says."""
        return sum(got == UNITS + 1 + i for i, got in enumerate(self.received))


class Http:
    def __init__(self, bases: list[str], slug: str) -> None:
        import aiohttp

        self.bases, self.slug = bases, slug
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=IN_FLIGHT + RETURNERS + 8),
            timeout=aiohttp.ClientTimeout(total=30),
        )
        self.tokens: dict[str, tuple[str, float]] = {}  # bearer -> (admission token, when)

    def headers(self, bearer: str, **more: str) -> dict[str, str]:
        n = hash(bearer) & 0xFFFFFF
        return {
            "Authorization": f"Bearer {bearer}",
            "Content-Type": "application/json",
            "X-Forwarded-For": f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}",
            "X-Forwarded-Proto": "https",
            **more,
        }

    async def send(self, method: str, path: str, bearer: str, **more: str) -> tuple[int, dict[str, Any]]:
        url = random.choice(self.bases) + path
        body = b'{"quantity": 1}' if method == "POST" else None
        async with self.session.request(method, url, headers=self.headers(bearer, **more), data=body) as r:
            raw = await r.read()
        try:
            payload = json.loads(raw) if raw else {}
        except ValueError:
            payload = {}
        return r.status, payload if isinstance(payload, dict) else {}

    async def admission(self, bearer: str) -> str | None:
        found = self.tokens.get(bearer)
        if found and time.monotonic() - found[1] < TOKEN_SECONDS:
            return found[0]
        status, place = await self.send("GET", f"/api/drops/{self.slug}/queue", bearer)
        token = place.get("admission_token") if status == 200 else None
        if token:
            self.tokens[bearer] = (token, time.monotonic())
        return token

    async def claim(self, bearer: str, room: bool) -> int:
        extra = {"Idempotency-Key": uuid.uuid4().hex}
        if room:
            token = await self.admission(bearer)
            if token is None:
                return 403  # not admitted (yet): the page would keep waiting
            extra["X-Admission-Token"] = token
        status, _ = await self.send("POST", f"/api/drops/{self.slug}/holds", bearer, **extra)
        return status


def buyer_ids(names: list[str]) -> list[int]:
    found = dict(query("SELECT username, id FROM auth_user WHERE username = ANY(%s)", [names]))
    return [found[name] for name in names]


def new_drop(room: bool, starts_at: dt.datetime) -> Any:
    from catalogue.services import create_drop

    return create_drop(
        slug=f"{SLUG_PREFIX}returns-{'room' if room else 'open'}-{time.time_ns()}",
        quantity=UNITS,
        starts_at=starts_at,
        ends_at=starts_at + dt.timedelta(hours=1),
        product_sku="BENCH-RETURNS",
        product_name="Returns benchmark item",
        price_minor=100,
        bucket_count=4,
        per_buyer_limit=1,
        waiting_room=room,
        admission_wave_seconds=1,
        offer_seconds=60,
        join_work_bits=0,  # the returns are measured here; `bench work` measures what a join costs
    )


async def run_returns(run: Run, bases: list[str], returns: int) -> None:
    from django.utils import timezone

    from admission import services as line
    from catalogue.services import create_buyers

    buyers = create_buyers(count=UNITS + returns + 200, prefix="crowd")
    names = [b.username for b in buyers]
    bearers = [b.token for b in buyers]
    ids = buyer_ids(names)
    bearer_of = dict(zip(ids, bearers, strict=True))
    drop = new_drop(run.room, timezone.now() + dt.timedelta(seconds=3))
    if run.room:
        say(f"{run.name}: {len(ids):,} buyers join the line before the start")
        await asyncio.to_thread(lambda: [line.join(drop=drop, buyer_id=b) for b in ids])
        numbered = dict(query("SELECT buyer_id, number FROM admission_ticket WHERE drop_id = %s", [drop.pk]))
        while not numbered or None in numbered.values():  # beat draws at the start
            await asyncio.sleep(0.5)
            numbered = dict(
                query("SELECT buyer_id, number FROM admission_ticket WHERE drop_id = %s", [drop.pk])
            )
        order = sorted(ids, key=numbered.__getitem__)
    else:
        order = ids  # the line is only a list here: the same measure, no waiting room to keep it
        query(
            "INSERT INTO admission_ticket (drop_id, buyer_id, number, joined_at)"
            " SELECT %s, b, n, now() FROM unnest(%s::bigint[]) WITH ORDINALITY AS x(b, n)",
            [drop.pk, order],
        )
        await asyncio.sleep(max(0.0, drop.starts_at.timestamp() - time.time()) + 1.2)
    http = Http(bases, drop.slug)
    try:
        # The rush: the first UNITS tickets take every unit (retrying until the wave admits them).
        firsts = [bearer_of[b] for b in order[:UNITS]]
        while True:
            statuses = await asyncio.gather(*(http.claim(b, run.room) for b in firsts))
            rows = query("SELECT buyer_id FROM holds_hold WHERE drop_id = %s", [drop.pk])
            have = {bearer_of[r[0]] for r in rows}
            firsts = [b for b in firsts if b not in have]
            if not firsts:
                break
            if 503 not in statuses and 403 not in statuses and 429 not in statuses:
                raise RuntimeError(f"the rush got {sorted(set(statuses))}")
            await asyncio.sleep(0.5)
        (last_rush,), *_ = query("SELECT max(id) FROM holds_hold WHERE drop_id = %s", [drop.pk])
        say(f"{run.name}: {UNITS} units held by the first tickets; {returns:,} returns under the crowd")
        await crowd_and_returns(run, http, drop.pk, bearer_of, bearers, returns)
        await settle(drop.pk, run.room)
    finally:
        await http.session.close()
    run.received = [
        r[0]
        for r in query(
            "SELECT t.number FROM holds_hold h JOIN admission_ticket t"
            " ON t.drop_id = h.drop_id AND t.buyer_id = h.buyer_id"
            " WHERE h.drop_id = %s AND h.id > %s ORDER BY h.id",
            [drop.pk, last_rush],
        )
    ]
    if run.room:
        released = query(
            "SELECT ended_at FROM holds_hold WHERE drop_id = %s AND state = 'released' ORDER BY ended_at",
            [drop.pk],
        )
        offered = query(
            "SELECT created_at FROM holds_hold WHERE drop_id = %s AND idempotency_key LIKE 'offer:%%'"
            " ORDER BY created_at",
            [drop.pk],
        )
        run.waits = [(o[0] - r[0]).total_seconds() for r, o in zip(released, offered, strict=False)]
    from holds.counts import invariant

    run.drift = invariant(drop_id=drop.pk).drift
    retire_old_drops()


async def crowd_and_returns(
    run: Run, http: Http, drop_id: int, bearer_of: dict[int, str], bearers: list[str], returns: int
) -> None:
    stop = asyncio.Event()
    done = 0

    async def crowd() -> None:
        while not stop.is_set():
            status = await http.claim(random.choice(bearers), run.room)
            run.crowd_requests += 1
            run.crowd_statuses[status] = run.crowd_statuses.get(status, 0) + 1

    released: set[int] = set()  # asked to release: two returners must not count one hold twice

    async def returner() -> None:
        nonlocal done
        while done < returns:
            rows = await asyncio.to_thread(
                query,
                "SELECT id, buyer_id FROM holds_hold WHERE drop_id = %s AND state = 'held'"
                " AND expires_at > now() ORDER BY random() LIMIT 1",
                [drop_id],
            )
            if not rows:
                await asyncio.sleep(0.05)  # every unit is on its way to the next ticket
                continue
            hold, buyer = rows[0]
            if hold in released:
                continue
            released.add(hold)
            status, body = await http.send("DELETE", f"/api/holds/{hold}", bearer_of[buyer])
            if status == 200 and body.get("state") == "released":  # the ones in flight at the end count too
                done += 1
                if done % 100 == 0:
                    say(f"{run.name}: {done:,} of {returns:,} returned")

    began = time.monotonic()
    crowds = [asyncio.create_task(crowd()) for _ in range(IN_FLIGHT)]
    await asyncio.gather(*(returner() for _ in range(RETURNERS)))
    run.returns, run.seconds = done, time.monotonic() - began
    await asyncio.sleep(2.0)  # the crowd keeps clicking while beat offers the last returns
    stop.set()
    await asyncio.gather(*crowds)


async def settle(drop_id: int, room: bool) -> None:
    """Until every returned unit has reached a buyer (beat's next offers), at most 30 s."""
    from inventory import sql

    deadline = time.monotonic() + 30
    while room and time.monotonic() < deadline:
        (returned,), *_ = query(sql.RETURNED_UNITS, {"drop": drop_id})
        if not returned:
            return
        await asyncio.sleep(0.5)


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:,.0f} ms"


def report(runs: list[Run]) -> str:
    lines = [
        "# bench returns",
        "",
        f"{UNITS} units, {IN_FLIGHT} crowd requests in flight, {RETURNERS} returners, over HTTP"
        " (production profile, web + Celery worker + beat).",
        "",
        "| drop | returns | in | receivers in ticket order | crowd requests | crowd won"
        " | wait for next buyer p50 / p99 | drift |",
        "|---|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in runs:
        share = f"{r.in_order:,} of {len(r.received):,} ({r.in_order / max(1, len(r.received)):.0%})"
        waits = f"{ms(quantile(r.waits, 0.5))} / {ms(quantile(r.waits, 0.99))}" if r.waits else "-"
        lines.append(
            f"| {r.name} | {r.returns:,} | {r.seconds:.1f} s | {share} | {r.crowd_requests:,}"
            f" | {r.crowd_won:,} | {waits} | {r.drift} |"
        )
    lines += [
        "",
        "Crowd answers: " + "; ".join(f"{r.name} {dict(sorted(r.crowd_statuses.items()))}" for r in runs),
    ]
    room = next((r for r in runs if r.room), None)
    if room is not None:
        exact = room.received == list(range(UNITS + 1, UNITS + 1 + len(room.received)))
        verdict = "OK" if exact and room.crowd_won == 0 and len(room.received) == room.returns else "MISS"
        lines += [
            "",
            f"{verdict}: the waiting room's returned units went to exactly the next tickets, in ticket"
            " order, and no click took one."
            if verdict == "OK"
            else f"{verdict}: see the table.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench returns")
    parser.add_argument("--quick", action="store_true", help="200 returns")
    parser.add_argument("--returns", type=int, default=None)
    args = parser.parse_args()
    returns = args.returns or (200 if args.quick else 1_000)
    raise_file_limit()
    OUT.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **production_env()}
    # This process reads and writes the database only between the crowd's phases, or on threads.
    setup_django({**env, "DJANGO_ALLOW_ASYNC_UNSAFE": "1"})
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    stack = Stack(env)
    runs = [Run("waiting room", room=True), Run("baseline: returns open", room=False)]
    try:
        say("starting the store: web, Celery worker and beat (production profile)")
        retire_old_drops()
        bases = stack.web("config.asgi:application")
        stack.celery()
        time.sleep(3)
        for run in runs:
            asyncio.run(run_returns(run, bases, returns))
            stack.check()
    finally:
        stack.stop()
    text = report(runs)
    path = OUT / f"returns-{dt.datetime.now(dt.UTC):%Y%m%d-%H%M%S}.txt"
    path.write_text(text)
    print(text)
    say(f"report written to {path.relative_to(ROOT)}")
    if reasons := failures(runs, text):
        print(f"bench returns: FAILED: {'; '.join(reasons)}", file=sys.stderr)
        sys.exit(2)


def failures(runs: list[Run], text: str) -> list[str]:
    """Why the run failed: drift, the room's MISS, or a run that measured nothing (the baseline
    with no unit back or no crowd shows nothing to set the room against)."""
    reasons = [f"{r.name}: drift {r.drift}" for r in runs if r.drift]
    reasons += [f"{r.name}: no unit came back" for r in runs if not r.returns]
    reasons += [f"{r.name}: the crowd got no answer" for r in runs if not sum(r.crowd_statuses.values())]
    if "MISS" in text:
        reasons.append("the waiting room's returns did not go to exactly the next tickets (MISS)")
    return reasons


if __name__ == "__main__":
    main()
