"""Who the client is: the one home of the address every per-address limit and lockout counts by
(admission's rate limits, the WebSocket cap, allauth's login and sign-up limits, django-axes).

Behind proxies each one appends the address it was connected from to X-Forwarded-For, so the
last TRUSTED_PROXY_HOPS entries were written by proxies this shop runs, and the entry that many
places from the right is the client as the outermost of them saw it. Anything left of it the
client may have written itself. Compose's shape, a TLS proxy in front of HAProxy, is 2 hops:
"<what the client sent>, <client>, <TLS proxy>". With 0 hops the header is never read.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest

UNKNOWN = "unknown"  # no socket address at all (a test client, a Unix socket)


def client_ip(request: HttpRequest) -> str:
    """The client's address for a Django request."""
    return client_address(request.META.get("REMOTE_ADDR"), request.headers.get("X-Forwarded-For"))


def client_address(remote: str | None, forwarded: str | None) -> str:
    """The client's address from the socket's peer and the X-Forwarded-For header (ASGI callers
    have no Django request)."""
    peer = str(remote or UNKNOWN)
    hops = trusted_hops()
    if not hops or not forwarded:
        return peer
    entries = [entry.strip() for entry in forwarded.split(",")]
    if len(entries) < hops:
        # Fewer entries than proxies: the request came round one of them, and whatever it
        # wrote cannot be told from what the proxies did. The peer is a proxy, never a spoof.
        return peer
    return _address(entries[-hops]) or peer


def trusted_hops() -> int:
    """TRUSTED_PROXY_HOPS; TRUST_X_FORWARDED_FOR on (the older switch) means at least one."""
    return max(int(settings.TRUSTED_PROXY_HOPS), int(bool(settings.TRUST_X_FORWARDED_FOR)))


def _address(entry: str) -> str | None:
    """An entry as one canonical address (a port some proxies add dropped), or None if it is none."""
    if entry.startswith("["):  # [2001:db8::1]:443
        entry = entry[1 : entry.find("]")] if "]" in entry else ""
    elif entry.count(":") == 1:  # 203.0.113.9:443
        entry = entry.split(":", 1)[0]
    try:
        return str(ipaddress.ip_address(entry))
    except ValueError:
        return None
