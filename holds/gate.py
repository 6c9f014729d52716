"""The Redis gate: an optional count of a drop's units in front of the database claim.

With `Drop.redis_gate` on, a reserve first takes its quantity from a Redis count in one Lua
call; when the count is short, the buyer hears "sold out" without a database query. The
count is a filter, never the arbiter: a yes from it still goes to PostgreSQL, which decides,
and a claim that takes no units gives them back. The count errs high, never low (a missing
key is rebuilt from the database, and `reconcile` resets it every second from the tick), so
it turns a buyer away only when the database would too, or for at most a second after units
came back. Redis errors answer 503 Busy: nothing is sold without the gate having said yes,
and nothing is sold because it did.

Keys (they expire when no tick refreshes them; a missing key is rebuilt, never read as 0):
    fg:gate:<drop>          units the gate still lets through
    fg:gate:<drop>:flight   units past the gate whose claim is still running (for on-call)
    fg:gate:<drop>:won      hash "<buyer>:<key>" of claims that won: a retried click of a
                            winner passes a sold-out gate to get its hold back
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol, TypeVar, cast

from django.utils.translation import gettext_lazy
from django_redis import get_redis_connection
from redis import Redis
from redis.exceptions import RedisError

from core.errors import Busy, SoldOut, fill
from core.metrics import GATE_REFUSALS_KEY
from holds.counts import claimable_by_drop

log = logging.getLogger(__name__)

COUNT = "fg:gate:{drop}"
FLIGHT = "fg:gate:{drop}:flight"
WON = "fg:gate:{drop}:won"
COUNT_TTL = 60  # the tick refreshes every second; without one, requests rebuild from the database
WON_TTL = 24 * 3600  # longer than any hold lives: a retried click comes within that

LIVE, ENDED = "live", "ended"  # shop.models.DropState's values
PASS, REPEAT, MISSING = 1, 2, 3  # TAKE's answers; a negative answer is a refusal: -(count) - 1

# KEYS: count, flight, won, refusals. ARGV: quantity, seed ('' = none), won field, drop id, TTL.
# Takes the quantity when the count has it; a missing count is set from the seed (NX: a
# rebuild racing another keeps the first) or reported so the caller reads the database.
TAKE = """
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 1 then return 2 end
local n = redis.call('GET', KEYS[1])
if not n then
  if ARGV[2] == '' then return 3 end
  redis.call('SET', KEYS[1], ARGV[2], 'NX', 'EX', ARGV[5])
  n = redis.call('GET', KEYS[1])
end
n = tonumber(n)
local q = tonumber(ARGV[1])
if n < q then
  redis.call('HINCRBY', KEYS[4], ARGV[4], 1)
  return -math.max(n, 0) - 1
end
redis.call('DECRBY', KEYS[1], q)
redis.call('INCRBY', KEYS[2], q)
redis.call('EXPIRE', KEYS[2], ARGV[5])
return 1
"""

# KEYS: count, flight, won. ARGV: quantity, '1' when the claim took nothing, won field, won TTL.
# Gives untaken units back only to a count that still exists: a rebuilt count already has
# them from the database, and INCRBY on a missing key would create a count of just q.
FINISH = """
local q = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[2]) == 1 and redis.call('DECRBY', KEYS[2], q) <= 0 then
  redis.call('DEL', KEYS[2])
end
if ARGV[2] == '1' then
  if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('INCRBY', KEYS[1], q) end
else
  redis.call('HSET', KEYS[3], ARGV[3], 1)
  redis.call('EXPIRE', KEYS[3], ARGV[4])
end
return 1
"""


class GateSoldOut(SoldOut):
    """Sold out, answered by the gate's count (the same answer to the buyer as the database's)."""


class Gated(Protocol):
    """What the gate needs to know of a drop (shop.models.Drop is one)."""

    pk: int
    per_buyer_limit: int
    redis_gate: bool

    @property
    def state(self) -> str: ...


class Claimed(Protocol):
    @property
    def created(self) -> bool: ...


C = TypeVar("C", bound=Claimed)


def _client() -> Redis:
    return cast(Redis, get_redis_connection("default"))  # django-redis is untyped


def _keys(drop_id: int) -> list[str]:
    return [COUNT.format(drop=drop_id), FLIGHT.format(drop=drop_id), WON.format(drop=drop_id)]


def gate_stock(drop_ids: list[int]) -> dict[int, int]:
    """Units a claim could get per drop (one statement, so one snapshot: a reclaim between
    reads can neither hide units nor count them twice)."""
    return claimable_by_drop(drop_ids)


def _wanted(drop: Gated, quantity: object) -> int | None:
    """The quantity to take, or None when the claim itself must answer (bad input, not live)."""
    if isinstance(quantity, bool) or not isinstance(quantity, int):
        return None
    if not 1 <= quantity <= drop.per_buyer_limit or drop.state != LIVE:
        return None
    return quantity


def through(drop: Gated, *, buyer_id: int, quantity: object, key: str | None, claim: Callable[[], C]) -> C:
    """Run `claim` (the database's reserve) behind the drop's gate.

    Refuses with GateSoldOut when the count is short, Busy when Redis fails; gives the
    quantity back when the claim raises or takes nothing (a repeated key).
    """
    q = _wanted(drop, quantity)
    if q is None or not isinstance(key, str):
        return claim()
    keys = [*_keys(drop.pk), GATE_REFUSALS_KEY]
    field = f"{buyer_id}:{key}"
    try:
        client = _client()
        verdict = int(client.eval(TAKE, 4, *keys, q, "", field, drop.pk, COUNT_TTL))
        if verdict == MISSING:
            seed = gate_stock([drop.pk])[drop.pk]
            verdict = int(client.eval(TAKE, 4, *keys, q, seed, field, drop.pk, COUNT_TTL))
    except (RedisError, OSError) as error:
        log.warning("gate: Redis unavailable for drop %s: %s", drop.pk, error)
        raise Busy(
            gettext_lazy("The shop is catching its breath; please wait a moment and try again.")
        ) from None
    if verdict == REPEAT:
        return claim()  # the database answers with the hold this key already has
    if verdict < 0:
        left = -verdict - 1
        if left == 0:
            raise GateSoldOut(gettext_lazy("Sold out. Units come back if a buyer does not pay in time."))
        raise GateSoldOut(fill(gettext_lazy("Only %(left)s left; ask for fewer."), left=left), remaining=left)
    try:
        result = claim()
    except BaseException:
        _finish(drop.pk, q, field, took=False)
        raise
    _finish(drop.pk, q, field, took=result.created)
    return result


def _finish(drop_id: int, quantity: int, field: str, *, took: bool) -> None:
    """Settle a passed claim; a failure here leaves the count low until the next reconcile."""
    try:
        _client().eval(FINISH, 3, *_keys(drop_id), quantity, "0" if took else "1", field, WON_TTL)
    except (RedisError, OSError) as error:
        log.warning(
            "gate: could not settle a claim of drop %s (reconciled within a second): %s", drop_id, error
        )


def reconcile(drops: Iterable[Gated]) -> int:
    """Reset each gated drop's count from the database (not ended drops); Redis down only logs.

    Claims in flight were taken from the old count and not yet from the database, so the
    reset counts them again: high for a moment, which is the safe side.
    """
    gated = [d.pk for d in drops if d.redis_gate and d.state != ENDED]
    if not gated:
        return 0
    stock = gate_stock(gated)
    try:
        pipe = _client().pipeline(transaction=False)
        for drop_id, units in stock.items():
            pipe.set(COUNT.format(drop=drop_id), units, ex=COUNT_TTL)
        pipe.execute()
    except (RedisError, OSError) as error:
        log.warning("gate: cannot reconcile drops %s: %s", gated, error)
        return 0
    return len(stock)


@dataclass(frozen=True)
class GateStatus:
    count: int | None  # None: no key (not set yet, expired or flushed)
    in_flight: int

    def as_json(self) -> dict[str, int | None]:
        return {"gate": self.count, "gate_in_flight": self.in_flight}


def status(drop_ids: list[int]) -> dict[int, GateStatus]:
    """The gate's counts for on-call, in one round trip; raises RedisError when Redis is down."""
    pipe = _client().pipeline(transaction=False)
    for drop_id in drop_ids:
        pipe.get(COUNT.format(drop=drop_id))
        pipe.get(FLIGHT.format(drop=drop_id))
    replies = pipe.execute()
    return {
        drop_id: GateStatus(
            count=None if replies[2 * i] is None else int(replies[2 * i]),
            in_flight=max(0, int(replies[2 * i + 1] or 0)),
        )
        for i, drop_id in enumerate(drop_ids)
    }
