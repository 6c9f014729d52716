"""Rate limits: a token bucket per account and per client address, kept in Redis.

Redis down means the limits cannot be kept, so the answer is "please wait" (503), never
an unlimited door: the admission layer fails closed.
"""

from __future__ import annotations

import math
import time

from django.conf import settings
from django.http import HttpRequest
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from shop.errors import Busy, RateLimited

# KEYS[1] the bucket; ARGV: capacity, refill per second, now (seconds). Takes one token if
# there is one; returns {1, 0} when allowed, {0, seconds until the next token} when not.
TAKE_TOKEN = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or capacity
local at = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - at) * rate)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'at', now)
redis.call('EXPIRE', KEYS[1], math.ceil(capacity / rate) + 1)
return {allowed, tostring(wait)}
"""


def take(key: str, *, burst: int, per_second: int) -> float:
    """0.0 when one more request is allowed now, else the seconds until it would be."""
    try:
        allowed, wait = get_redis_connection("default").eval(
            TAKE_TOKEN, 1, key, burst, per_second, time.time()
        )
    except (RedisError, OSError):
        raise Busy("The shop is catching its breath; please wait a moment and try again.") from None
    return 0.0 if allowed else float(wait)


def client_ip(request: HttpRequest) -> str:
    """The client's address; behind a proxy, the one it appended to X-Forwarded-For last."""
    if settings.TRUST_X_FORWARDED_FOR:
        forwarded = request.headers.get("X-Forwarded-For", "")
        if forwarded:
            return forwarded.split(",")[-1].strip()
    return str(request.META.get("REMOTE_ADDR", "unknown"))


def check_buyer(request: HttpRequest, *, scope: str) -> None:
    """Raise RateLimited (429 with Retry-After) when the account or its address goes too fast."""
    checks = [
        (
            f"fg:rl:{scope}:ip:{client_ip(request)}",
            settings.IP_RATE_LIMIT_BURST,
            settings.IP_RATE_LIMIT_PER_SECOND,
        ),
        (f"fg:rl:{scope}:user:{request.user.pk}", settings.RATE_LIMIT_BURST, settings.RATE_LIMIT_PER_SECOND),
    ]
    for key, burst, per_second in checks:
        wait = take(key, burst=burst, per_second=per_second)
        if wait:
            raise RateLimited(
                f"Too many attempts; try again in {math.ceil(wait)} s.", retry_after=math.ceil(wait)
            )
