"""Who a lane request is, found as core.api finds them: the bearer token, else the session and
Django's own CSRF check; each looked up through a per-process cache (core.lookups.BatchedLookup).

A token or session looked up is trusted for AUTH_SECONDS / SESSION_SECONDS; a revocation anywhere
drops that buyer from every process's caches at once (admission.state.revoke -> the edge ->
forget_buyer), a lookup that read the database before it keeps nothing, and every claim
statement needs the account active whatever is cached. A crowd's first requests are all new
tokens: those not cached yet are resolved together, one query per group.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.utils.translation import gettext_lazy

from admission import tokens
from core.api import CSRF_FAILED, LOG_IN
from core.asgi import Scope, csrf_failure_of
from core.errors import CsrfFailed, Unauthenticated
from core.lookups import BatchedLookup
from sale.workers import Workers

AUTH_SECONDS = 30.0
SESSION_SECONDS = 10.0  # a session logged out elsewhere still claims for at most this long
UNKNOWN_SECONDS = 1.0  # an unknown token or session: a flood of it costs one query a second
MAX_LOOKUPS = 500  # tokens resolved by one query
SESSIONS_PER_LOOKUP = 50  # sessions are read one by one, on one thread
CACHE_SIZE = 100_000


@dataclass(frozen=True, slots=True)
class Who:
    """The buyer of a request and what signed it in (a queue ticket is bound to that)."""

    buyer_id: int
    bound_to: str
    token: str | None = None
    session: str | None = None


class Credentials:
    def __init__(self, workers: Workers) -> None:
        self.tokens: BatchedLookup[str, int] = BatchedLookup(
            workers.users_of_tokens,
            seconds=AUTH_SECONDS,
            miss_seconds=UNKNOWN_SECONDS,
            size=CACHE_SIZE,
            batch=MAX_LOOKUPS,
        )
        self.sessions: BatchedLookup[str, int] = BatchedLookup(
            workers.users_of_sessions,
            seconds=SESSION_SECONDS,
            miss_seconds=UNKNOWN_SECONDS,
            size=CACHE_SIZE,
            batch=SESSIONS_PER_LOOKUP,
        )

    async def who(self, scope: Scope, body: bytes, *, token: str | None, session: str | None) -> Who:
        """The buyer, as core.api finds them: the bearer token, else the session and its CSRF check."""
        if token is not None:
            buyer_id = await self.tokens.get(token)
            if buyer_id is None:
                raise Unauthenticated(gettext_lazy("That bearer token is not valid."))
            bound_to = tokens.credential(bearer=token, session_key=None)
            assert bound_to is not None  # a token was sent
            return Who(buyer_id, bound_to, token=token)
        assert session is not None
        buyer_id = await self.sessions.get(session)
        if buyer_id is None:
            raise Unauthenticated(LOG_IN)
        if csrf_failure_of(scope, body) is not None:
            raise CsrfFailed(CSRF_FAILED)
        bound_to = tokens.credential(bearer=None, session_key=session)
        assert bound_to is not None
        return Who(buyer_id, bound_to, session=session)

    def forget(self, who: Who) -> None:
        """This request's account went away since it was cached: look it up again."""
        if who.token is not None:
            self.tokens.forget_key(who.token)
        if who.session is not None:
            self.sessions.forget_key(who.session)

    def forget_all(self) -> None:
        """Every token and session is asked about again. Safe from another thread."""
        self.tokens.forget()
        self.sessions.forget()

    def forget_buyer(self, buyer_id: int) -> None:
        """One buyer's tokens and sessions are asked about again (theirs were revoked); the rest
        stay cached. Safe from another thread."""
        self.tokens.forget_where(lambda found: found == buyer_id)
        self.sessions.forget_where(lambda found: found == buyer_id)

    def new_loop(self) -> None:
        self.tokens.new_loop()
        self.sessions.new_loop()
