"""The Content-Security-Policy on every page: the shop's own scripts and styles run (the inline
blocks by their nonce), an injected one does not."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from tests.factories import make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WATCH = """
window.__refused = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__refused.push(e.violatedDirective + " " + (e.blockedURI || "inline"));
});
"""
INJECT = """() => {
  var script = document.createElement("script");
  script.textContent = "window.__injected = true;";
  document.body.appendChild(script);
  return window.__injected === true;
}"""


def visit(page: Page, url: str, ready: str) -> list[str]:
    """Open the page, wait for what its scripts draw, and return what its CSP refused."""
    page.goto(url)
    page.wait_for_selector(ready)
    return page.evaluate("window.__refused")


def test_every_page_runs_its_own_scripts_and_styles_and_refuses_an_injected_one(
    live_daphne: str, browser: Browser, roles: None
) -> None:
    make_drop(slug="csp-drop", quantity=5)
    make_drop(slug="csp-line", quantity=5, waiting_room=True)
    user = get_user_model().objects.create_user(
        username="csp-oncall", password="pw-pw-pw-pw-pw", is_staff=True
    )
    user.groups.add(Group.objects.get(name="On-call"))
    context = browser.new_context()
    context.add_init_script(WATCH)
    page = context.new_page()
    console = []
    page.on("console", lambda message: console.append(message.text))

    pages = {
        "home": visit(page, f"{live_daphne}/", "body"),
        "drop": visit(page, f"{live_daphne}/drops/csp-drop/", "#drop-state"),
        "waiting room": visit(page, f"{live_daphne}/drops/csp-line/", "body"),
        "api docs": visit(page, f"{live_daphne}/docs/api/", ".swagger-ui .info"),
    }
    console_before = [line for line in console if "Content Security Policy" in line]
    injected = page.evaluate(INJECT)
    refused_injection = page.evaluate("window.__refused")
    page.goto(f"{live_daphne}/admin/login/")
    page.fill("#id_username", "csp-oncall")
    page.fill("#id_password", "pw-pw-pw-pw-pw")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/$"))
    # the dashboard's inline script draws each card's chart and legend from the data endpoint
    dashboard = f"{live_daphne}/admin/shop/drop/dashboard/"
    header = page.context.request.get(dashboard).headers["content-security-policy"]  # inline blocks
    pages["dashboard"] = visit(page, dashboard, "section[data-drop=csp-drop] .fg-legend")
    context.close()

    assert "script-src 'self' 'nonce-" in header and "style-src 'self' 'nonce-" in header, header
    assert "object-src 'none'" in header and "frame-ancestors 'none'" in header, header
    assert all(refused == [] for refused in pages.values()), pages
    assert console_before == [], console_before
    # the control: a script the page did not mark does not run, and the policy says so
    assert injected is False and any(r.startswith("script-src") for r in refused_injection), refused_injection
