"""Where a buyer may be sent to pay: the provider's own pages, compared as parsed URLs.

A string prefix is not a check: `http://127.0.0.1:@evil.example/` starts with
`http://127.0.0.1:` and sends the browser to evil.example (the part before `@` is a user
name). Each allowed entry (PAYMENT_PROVIDER_PUBLIC_PREFIXES) is `scheme://[host][:port][/path]`:
the scheme must match, and the host, port and path prefix where the entry names them.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from django.conf import settings

SCHEMES = frozenset({"http", "https"})


def allowed(url: str, entries: tuple[str, ...] | None = None) -> bool:
    """True when `url` is a plain http(s) URL on one of the allowed origins."""
    parsed = _plain(url)
    if parsed is None:
        return False
    for entry in settings.PAYMENT_PROVIDER_PUBLIC_PREFIXES if entries is None else entries:
        rule = urlsplit(entry.strip())
        if rule.scheme.lower() != parsed.scheme.lower():
            continue
        if rule.hostname and rule.hostname != parsed.hostname:  # hostname is lower-cased
            continue
        if _port(rule) is not None and _port(rule) != _port(parsed):
            continue
        if rule.path and not parsed.path.startswith(rule.path):
            continue
        return True
    return False


def _plain(url: str) -> SplitResult | None:
    """The URL parsed, or None when a browser could read it otherwise than urlsplit does."""
    if any(c.isspace() or ord(c) < 0x20 or c == "\\" for c in url):
        return None  # browsers drop tabs and newlines and read "\" as "/": not ours to guess
    try:
        parsed = urlsplit(url)
        parsed.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return None
    if parsed.scheme.lower() not in SCHEMES or not parsed.hostname:
        return None
    if parsed.username is not None or parsed.password is not None or "@" in parsed.netloc:
        return None  # user:password@host: the host is after the "@", whatever comes before
    return parsed


def _port(parts: SplitResult) -> int | None:
    try:
        return parts.port
    except ValueError:
        return None
