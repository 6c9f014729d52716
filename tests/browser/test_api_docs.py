"""The API reference page as a reader sees it: the error example is text, and the schema names
(Swagger UI's buttons) are Swagger's, not the shop's accent-coloured buttons."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_reference_shows_the_error_shape_as_text_and_readable_schema_names(
    live_daphne: str, page: Page
) -> None:
    page.goto(f"{live_daphne}/docs/api/")
    page.wait_for_selector(".swagger-ui .info .description")
    described = page.inner_text(".swagger-ui .info .description")
    page.wait_for_selector(".swagger-ui section.models button")
    backgrounds = page.evaluate(
        """() => [...document.querySelectorAll("#swagger-ui section.models button")]
                 .map(b => getComputedStyle(b).backgroundColor)"""
    )
    shop_button = page.evaluate(
        """() => { const b = document.createElement("button"); document.body.appendChild(b);
                   const c = getComputedStyle(b).backgroundColor; b.remove(); return c; }"""
    )

    assert '{"error": "<code>", "detail": "<what to do>"}' in described, described
    assert backgrounds and shop_button not in backgrounds, (backgrounds, shop_button)
    assert shop_button not in ("rgba(0, 0, 0, 0)", "transparent")  # the shop's own buttons keep theirs
