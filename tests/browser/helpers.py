"""What the browser tests share: the way into the line or to a hold, and database work off the loop."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from django.db import connections

if TYPE_CHECKING:
    from playwright.sync_api import Page

T = TypeVar("T")


def off_the_loop(job: Callable[[], T]) -> T:
    """Run in another thread: a wave publishes through async_to_sync, which refuses Playwright's loop."""

    def run() -> T:
        try:
            return job()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(run).result()


def join_from_the_link(page: Page, base: str, username: str, slug: str = "wr-live") -> None:
    page.goto(f"{base}/drops/{slug}/")
    page.get_by_role("link", name="Join the waiting room").click()
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(rf"/drops/{slug}/queue/$"))
    page.get_by_role("button", name="Join the waiting room").click()  # a POST: joining changes state
    page.wait_for_selector("#queue")
    page.evaluate("window.stayedOnThePage = true")  # gone if the page reloads


def reserve_from_the_drop_page(
    page: Page, base: str, slug: str, username: str, *, variant: str | None = None
) -> None:
    """Log in from the drop page and press Reserve there (after picking `variant`, as a buyer clicks it)."""
    page.goto(f"{base}/accounts/login/?next=/drops/{slug}/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "correct horse battery")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(rf"/drops/{slug}/$"))
    if variant is not None:
        page.click(f"#variant-picker label[data-variant='{variant}']")
    page.click("#buy")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
