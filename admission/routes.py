"""Which requests the edge looks at, by path and method; everything else goes straight to Django."""

from __future__ import annotations

import re

from core.asgi import SLUG, Scope

STATE, CLAIM_JSON, CLAIM_PAGE, QUEUE, JOIN = "state", "claim_json", "claim_page", "queue", "join"
STATE_PATH = re.compile(r"/api/drops/([^/]+)")
QUEUE_PATH = re.compile(r"/api/drops/([^/]+)/queue")
CLAIM_JSON_PATH = re.compile(r"/api/drops/([^/]+)/holds")
CLAIM_PAGE_PATH = re.compile(r"/drops/([^/]+)/buy")


def route(scope: Scope) -> tuple[str, str] | None:
    """(what, slug) for the requests the edge looks at; None for everything else, and for a slug
    Django's converter would not take (NUL and the like): Django answers those 404 without a query,
    where the lane would have looked the slug up."""
    found = _route(scope.get("path", ""), scope.get("method", ""))
    return found if found is not None and SLUG.fullmatch(found[1]) else None


def _route(path: str, method: str) -> tuple[str, str] | None:
    if method == "POST":
        if found := CLAIM_JSON_PATH.fullmatch(path):
            return CLAIM_JSON, found[1]
        if found := CLAIM_PAGE_PATH.fullmatch(path):
            return CLAIM_PAGE, found[1]
        if found := QUEUE_PATH.fullmatch(path):
            return JOIN, found[1]
    elif method in ("GET", "HEAD") and (found := STATE_PATH.fullmatch(path)):
        return STATE, found[1]
    elif method == "GET" and (found := QUEUE_PATH.fullmatch(path)):
        return QUEUE, found[1]
    return None
