"""The waiting room's poll (GET /api/drops/<slug>/queue) answered at the edge.

For a buyer who sends back the signed queue ticket (cookie or X-Queue-Ticket header), or only
their bearer token (the lane's token cache names the buyer, one batched read their ticket): the
position is the ticket's number against the published mark, which only ever lags the database's,
so an admission here is never early. The body is admission.state.place_answer's, as Django's.
Anything it cannot vouch for (no snapshot, a ticket signed before the buyer's ban, an offer)
is Django's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import Counter
from collections.abc import Awaitable, Callable

from django.conf import settings
from django.db import connections

from admission import sql, state, tokens
from admission.answers import Place
from admission.background import DB_THREADS, close_connections
from admission.published import MAX_ENTRIES, Known, Snapshots
from core.asgi import PRIVATE_HEADERS, Answer, Scope, bearer, cookies, header
from core.lookups import BatchedLookup

# A ticket signed up to this long after a revocation is Django's too: a request authenticated just
# before the ban may sign its ticket just after it, and hosts' clocks differ a little.
REVOCATION_GRACE = 5.0
# Buyers revoked within a ticket's life that this process remembers: every logout is one (about
# 100 bytes each); past it the oldest half is forgotten and their old tickets are answered here again.
MAX_REVOKED = 100_000
# A ticket looked up for a poll with only a bearer token is kept this long: its number comes from
# the draw's map once drawn, and a revoked token is forgotten by the lane at once.
TICKET_SECONDS = 30.0
TicketKey = tuple[int, int]  # (drop, buyer)
TicketHeld = tuple[int, int | None]  # (entry, number: None before the draw)
TICKET_HEADER = tokens.TICKET_HEADER.lower().encode()
ADMITTING_STATES = ("live", "paused")  # where Django's place hands out an admission token
BuyerOf = Callable[[str], Awaitable[int | None]]  # whose bearer token this is (the lane's cache)


def place(known: Known, ticket: tokens.QueueTicket, *, sent: str) -> Place | None:
    """The body Django's queue API gives this ticket's buyer (services.Standing.as_json); None: ask Django.

    Before the draw a ticket has no number: while the snapshot says undrawn, its answer is the
    entry's (no place yet); once drawn, the caller looks its number up in the draw's map.
    """
    queue = known.queue
    if queue is None or known.drop.get("waiting_room") is not True or known.drop_id != ticket.drop_id:
        return None
    drawn = queue.get("seed") is not None
    number = ticket.number
    if number is None and drawn:
        return None  # the caller found no number in the draw's map
    if number is not None and number <= int(queue.get("offered_through") or 0):
        return None  # offered a returned unit (or passed): Django reads the offer
    admitted_through = int(queue["admitted_through"])
    token = None
    if number is not None and number <= admitted_through and known.drop["state"] in ADMITTING_STATES:
        token = tokens.issue(drop_id=ticket.drop_id, buyer_id=ticket.buyer_id, ticket=number)
    return state.place_answer(
        queue,
        entry=ticket.entry,
        number=number,
        admitted_through=admitted_through,
        drawn=drawn,
        token=token,
        queue_ticket=sent,
    )


def credential(scope: Scope) -> str | None:
    """What the request is signed in with, hashed as tokens.credential: a bearer token, else the session."""
    sent = [bytes(v).decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
    if sent:  # core.api takes the bearer token when the header is there at all (repeats joined, as Django)
        scheme, _, raw = ",".join(sent).partition(" ")
        return tokens.credential(bearer=raw.strip(), session_key=None) if scheme.lower() == "bearer" else None
    return tokens.credential(bearer=None, session_key=cookies(scope).get(settings.SESSION_COOKIE_NAME))


def _tickets_of(keys: list[TicketKey]) -> dict[TicketKey, TicketHeld]:
    try:
        with connections["default"].cursor() as cursor:
            cursor.execute(sql.TICKETS_OF, {"drops": [d for d, _ in keys], "buyers": [b for _, b in keys]})
            return {(drop, buyer): (entry, number) for drop, buyer, entry, number in cursor.fetchall()}
    finally:
        close_connections()


class Polls:
    """One process's poll answers: the bans it has heard of, and the tickets it has looked up."""

    def __init__(self, snapshots: Snapshots, *, stats: Counter[str]) -> None:
        self.snapshots = snapshots
        self.stats = stats
        self._revoked: dict[int, float] = {}  # buyer -> when their credentials were revoked
        # (drop, buyer) -> (entry, number): the ticket of a poll that carries only a bearer token
        self._tickets: BatchedLookup[TicketKey, TicketHeld] = BatchedLookup(
            self._fetch_tickets, seconds=TICKET_SECONDS, size=MAX_ENTRIES
        )
        # (drop, entry) -> the number the draw gave it: the line's first polls after the draw,
        # read from the published map together, and not kept (the map is the word: a map flushed
        # sends the poll to Django)
        self._numbers: BatchedLookup[tuple[int, int], int] = BatchedLookup(
            self._fetch_numbers, seconds=0.0, size=MAX_ENTRIES
        )

    async def answer(self, known: Known, scope: Scope, *, buyer_of: BuyerOf | None) -> Answer | None:
        if known.drop_id is None:
            return None
        sent, from_cookie = header(scope, TICKET_HEADER), False
        if sent is None:
            sent = cookies(scope).get(tokens.TICKET_COOKIE)
            from_cookie = sent is not None
        bound_to = credential(scope)
        found = tokens.ticket(sent, drop_id=known.drop_id, bound_to=bound_to)
        if sent is None and bound_to is not None and buyer_of is not None:
            found, sent = await self._ticket_by_bearer(known.drop_id, scope, bound_to, buyer_of) or (
                None,
                None,
            )
        if found is None or sent is None or bound_to is None:
            return None
        if found.issued <= self._revoked.get(found.buyer_id, -1.0) + REVOCATION_GRACE:
            return None  # signed before (or as) the buyer's credentials were revoked: Django checks them
        headers: tuple[tuple[bytes, bytes], ...] = PRIVATE_HEADERS
        if found.number is None and known.queue is not None and known.queue.get("seed") is not None:
            # Drawn since the ticket was signed: the whole line asks at the start, so its number
            # comes from the draw's published map, with a ticket that carries it from now on.
            number = await self._numbers.get((known.drop_id, found.entry))
            if number is None:
                return None  # the map is gone: Django reads the ticket
            found = dataclasses.replace(found, number=number)
            sent = tokens.issue_ticket(
                drop_id=found.drop_id,
                buyer_id=found.buyer_id,
                entry=found.entry,
                number=number,
                bound_to=bound_to,
                issued=found.issued,
            )
            if from_cookie:
                cookie = tokens.ticket_cookie(known.drop["slug"], sent)[tokens.TICKET_COOKIE].OutputString()
                headers = (*headers, (b"set-cookie", cookie.encode("latin-1")))
        body = place(known, found, sent=sent)
        if body is None:
            return None
        self.stats["queue"] += 1
        return Answer(200, body.dump_json(), headers=headers)

    def note_revoked(self, buyer: int, at: float) -> None:
        """The buyer's credentials were revoked at `at`: tickets signed before it are Django's."""
        if len(self._revoked) >= MAX_REVOKED and buyer not in self._revoked:
            # a ticket's life of logouts and bans: the oldest half goes (their old tickets are answered
            # here again; a banned buyer's claims are still refused by the database)
            keep = sorted(self._revoked.items(), key=lambda item: item[1])[MAX_REVOKED // 2 :]
            self._revoked = dict(keep)
        self._revoked[buyer] = max(at, self._revoked.get(buyer, at))

    def forget(self) -> None:
        self._tickets.forget()

    def new_loop(self) -> None:
        """Futures belong to the loop that made them: a new loop starts with no lookup pending."""
        self._tickets.new_loop()
        self._numbers.new_loop()

    async def _ticket_by_bearer(
        self, drop_id: int, scope: Scope, bound_to: str, buyer_of: BuyerOf
    ) -> tuple[tokens.QueueTicket, str] | None:
        """A poll with only its bearer token (the ticket is optional in the contract): the buyer
        and their ticket, signed here for the answer. None (Django answers): no bearer token, no
        such account, or not in this line."""
        token = bearer(scope)
        if token is None:
            return None
        buyer_id = await buyer_of(token)
        if buyer_id is None:
            return None
        held = await self._tickets.get((drop_id, buyer_id))
        if held is None:
            return None
        entry, number = held
        found = tokens.QueueTicket(drop_id, buyer_id, entry, number, issued=time.time())
        signed = tokens.issue_ticket(
            drop_id=drop_id, buyer_id=buyer_id, entry=entry, number=number, bound_to=bound_to,
            issued=found.issued,
        )  # fmt: skip
        self.stats["bearer_poll"] += 1
        return found, signed

    async def _fetch_tickets(self, keys: list[TicketKey]) -> dict[TicketKey, TicketHeld]:
        return await asyncio.get_running_loop().run_in_executor(DB_THREADS, _tickets_of, keys)

    async def _fetch_numbers(self, keys: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
        return await state.drawn_numbers(self.snapshots.client(), keys)
