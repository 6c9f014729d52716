"""Playwright's Python package driving Debian's Chromium (no browser download)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

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
def browser() -> Iterator[Browser]:
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
def page(browser: Browser) -> Iterator[Page]:
    """A page in a fresh context: its own cookies, so its own login."""
    context = browser.new_context()
    context.set_default_timeout(15_000)
    refused: list[str] = []  # Chromium reports what a page's Content-Security-Policy blocked
    context.on("console", lambda m: refused.append(m.text) if "Content Security Policy" in m.text else None)
    yield context.new_page()
    context.close()
    assert not refused, refused  # every test's pages ran all their own scripts and styles


@pytest.fixture(scope="package")
def live_store(django_db_setup: None, payment_provider: str) -> Iterator[str]:
    """The app as `floodgate.py run` serves it: DEBUG off, so the shop's own 404 and 500 pages."""
    from devtools.ports import free_port
    from tests.conftest import app_env, start_process, stop, wait_for_port

    port = free_port()
    env = {**app_env(payment_provider, f"http://127.0.0.1:{port}"), "DEBUG": "0", "DB_POOL_MAX_SIZE": "4"}
    daphne = str(Path(sys.executable).parent / "daphne")
    process, log = start_process(
        f"store-{port}", [daphne, "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"], env
    )
    wait_for_port(port, process, log)
    yield f"http://127.0.0.1:{port}"
    stop(process)


@pytest.fixture
def phone(browser: Browser) -> Iterator[Page]:
    """A 390x844 phone (touch, 3x pixels) in Berlin with a German browser: its own clock and format."""
    context = browser.new_context(
        viewport={"width": 390, "height": 844},
        device_scale_factor=3,
        is_mobile=True,
        has_touch=True,
        locale="de-DE",
        timezone_id="Europe/Berlin",
    )
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()
