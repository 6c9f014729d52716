"""Playwright's Python package driving Debian's Chromium (no browser download)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

# Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        raise RuntimeError("Chromium is missing: `python3 floodgate.py test` installs Debian's chromium.")
    return path


@pytest.fixture(scope="package")
def browser() -> Iterator[object]:
    """One Chromium for the browser tests. Package-scoped: Playwright's sync API keeps an event
    loop running in the main thread while it lives, and tests after these start loops of their own."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    """A page in a fresh context: its own cookies, so its own login."""
    context = browser.new_context()
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()
