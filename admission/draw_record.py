"""The draw's public record, `GET /api/drops/<slug>/queue/draw`, kept once drawn.

A drawn draw never changes (the seed, the closed list, the round and the order are fixed in the
draw's transaction), yet its document grows with the line: 260 KB and a read of every entry at
20,000. So it is computed on its first request after the draw and kept in Redis under the drop and
the moment of the draw; every later request costs two indexed reads and one GET, and a client that
sends back the ETag or Last-Modified costs no GET at all (admission/__init__.py).
Before the draw the document is small and still changing: computed each time, never kept.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime

from django.core.serializers.json import DjangoJSONEncoder
from django.utils import translation
from django_redis import get_redis_connection
from redis.exceptions import RedisError

from admission import services
from admission.models import Queue
from shop.models import Drop

log = logging.getLogger(__name__)

KEY = "fg:draw:{drop}:{drawn}:{language}"  # its `trust` is in the reader's language
KEEP_SECONDS = 7 * 24 * 3600  # unread for a week: recomputed (the same bytes) on the next request


@dataclass(frozen=True)
class Drawn:
    """A drawn draw's name, known without reading its document: the drop and when it was drawn."""

    drop_id: int
    at: datetime
    language: str = "en"

    @property
    def version(self) -> int:
        return int(self.at.timestamp() * 1_000_000)

    @property
    def etag(self) -> str:
        return f'"draw-{self.drop_id}-{self.version}-{self.language}"'

    @property
    def key(self) -> str:
        return KEY.format(drop=self.drop_id, drawn=self.version, language=self.language)


def drawn(*, drop: Drop) -> Drawn | None:
    """When the drop's line was drawn (one read of the queue row); None before the draw, and for
    a drop without a waiting room (whose answer is the draw_entries error, computed each time)."""
    if not drop.waiting_room:
        return None
    at = Queue.objects.filter(pk=drop.pk).values_list("drawn_at", flat=True).first()
    return None if at is None else Drawn(drop_id=drop.pk, at=at, language=translation.get_language() or "en")


def document(*, drop: Drop, drawn: Drawn | None) -> bytes:
    """The draw's JSON: a drawn one from Redis, computed and kept by its first request.

    Redis away: computed, as before the draw (the answer is the same, only dearer)."""
    if drawn is None:
        return _encode(services.draw_entries(drop=drop))
    try:
        kept = get_redis_connection("default").get(drawn.key)
    except RedisError as error:
        log.warning("draw record of drop %s: Redis unavailable: %s", drop.pk, error)
        return _encode(services.draw_entries(drop=drop))
    if isinstance(kept, bytes):
        return kept
    body = _encode(services.draw_entries(drop=drop))
    try:
        get_redis_connection("default").set(drawn.key, body, ex=KEEP_SECONDS)
    except RedisError as error:
        log.warning("draw record of drop %s: not kept: %s", drop.pk, error)
    return body


def _encode(body: dict[str, object]) -> bytes:
    return json.dumps(body, cls=DjangoJSONEncoder).encode()
