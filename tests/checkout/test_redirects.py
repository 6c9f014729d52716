"""The buyer is sent only to the provider's own pages: URLs compared parsed, not by prefix."""

from __future__ import annotations

import pytest

from checkout.redirects import allowed

DEV = ("http://127.0.0.1:", "http://localhost:")
PROVIDER = ("https://pay.example", "https://checkout.pay.example:8443/hosted/")


@pytest.mark.parametrize(
    ("url", "entries"),
    [
        ("http://127.0.0.1:8701/pay/ses_1", DEV),
        ("http://localhost:8701/pay/ses_1", DEV),
        ("https://pay.example/s/1", PROVIDER),
        ("https://PAY.example/s/1", PROVIDER),  # host names are case-insensitive
        ("https://checkout.pay.example:8443/hosted/s/1", PROVIDER),
        ("https://anything.example/pay", ("https://",)),  # an entry naming only a scheme: any host
    ],
)
def test_the_providers_pages_are_allowed(url: str, entries: tuple[str, ...]) -> None:
    assert allowed(url, entries)


@pytest.mark.parametrize(
    ("url", "entries"),
    [
        ("http://127.0.0.1:@evil.example/", DEV),  # passed the old prefix check: a user name
        ("http://127.0.0.1:8701@evil.example/", DEV),
        ("http://localhost:x@evil.example/", DEV),
        ("http://127.0.0.1.evil.example/", DEV),
        ("https://127.0.0.1:8701/", DEV),  # another scheme
        ("https://pay.example.evil.example/s/1", PROVIDER),
        ("https://evil.example/?https://pay.example", PROVIDER),
        ("http://pay.example/s/1", PROVIDER),  # not over TLS
        ("https://checkout.pay.example:8443/other/s/1", PROVIDER),  # outside the path
        ("https://checkout.pay.example:9999/hosted/s/1", PROVIDER),  # another port
        ("https://pay.example\\@evil.example/", PROVIDER),  # browsers read "\" as "/"
        ("https://pay.ex\tample/", PROVIDER),  # browsers drop tabs
        ("javascript:alert(1)//https://pay.example", PROVIDER),
        ("//evil.example/", ("https://",)),
        ("https://", ("https://",)),
        ("https://pay.example:99999/", PROVIDER),
        ("", PROVIDER),
    ],
)
def test_anything_else_is_refused(url: str, entries: tuple[str, ...]) -> None:
    assert not allowed(url, entries)
