"""A drop's admin change page in a real browser: the change form saves, the kill switch beside it works."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from devtools.ports import free_port
from shop.models import Drop, PauseAction, PauseEvent
from tests.conftest import app_env, start_process, stop, wait_for_port
from tests.factories import make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-pw-pw-pw-pw"


@pytest.fixture
def admin_daphne(transactional_db: None, payment_provider: str) -> Iterator[str]:
    """A real daphne for this test alone, started as `live_daphne` starts its own.

    Save and Pause write the admin log, whose content-type ids a long-lived server caches; the
    flush after each transactional test renumbers them, so a shared server fails the next test.
    """
    port = free_port()
    env = {**app_env(payment_provider, f"http://127.0.0.1:{port}"), "DB_POOL_MAX_SIZE": "4"}
    daphne = str(Path(sys.executable).parent / "daphne")
    command = [daphne, "-b", "127.0.0.1", "-p", str(port), "config.asgi:application"]
    process, log = start_process(f"daphne-admin-{port}", command, env)
    wait_for_port(port, process, log)
    yield f"http://127.0.0.1:{port}"
    stop(process)


def merchant_on_call(page: Page, base: str) -> None:
    """Log in a merchant who is also on call: the change page then holds the kill switch's own form."""
    user = get_user_model().objects.create_user(username="mona", password=PASSWORD, is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=["Merchants", "On-call"]))
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "mona")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/$"))


def test_the_change_form_saves_by_button_and_by_enter(admin_daphne: str, page: Page, roles: None) -> None:
    drop = make_drop(slug="retitled", quantity=10, title="Old title")
    merchant_on_call(page, admin_daphne)
    change = f"{admin_daphne}/admin/shop/drop/{drop.pk}/change/"

    # Save
    page.goto(change)
    page.fill("#id_title", "Spring sneakers")
    page.click("input[name=_save]")
    page.wait_for_url(re.compile(r"/admin/shop/drop/$"))
    assert Drop.objects.get(pk=drop.pk).title == "Spring sneakers"

    # Enter in a field submits the change form, not the kill switch's
    page.goto(change)
    page.fill("#id_title", "Summer sneakers")
    page.press("#id_title", "Enter")
    page.wait_for_url(re.compile(r"/admin/shop/drop/$"))
    assert Drop.objects.get(pk=drop.pk).title == "Summer sneakers"
    assert Drop.objects.get(pk=drop.pk).paused is False


def test_pause_and_resume_from_the_change_page(admin_daphne: str, page: Page, roles: None) -> None:
    drop = make_drop(slug="halted", quantity=10, title="Halted sale")
    merchant_on_call(page, admin_daphne)
    page.goto(f"{admin_daphne}/admin/shop/drop/{drop.pk}/change/")

    # when the merchant pauses with a reason
    page.fill(".fg-switch input[name=reason]", "price typo")
    page.get_by_role("button", name="Pause sale now").click()
    page.wait_for_selector(".fg-switch.is-paused")

    # then the drop is paused at the database, with the reason, and the page says so
    paused = Drop.objects.get(pk=drop.pk)
    assert (paused.state, paused.paused, paused.pause_reason) == ("paused", True, "price typo")
    event = PauseEvent.objects.get(drop=drop)
    assert event.actor is not None
    assert (event.action, event.reason, event.actor.username) == (PauseAction.PAUSED, "price typo", "mona")
    said = page.locator(".messagelist").inner_text()
    assert "The sale of Halted sale (halted) is paused: nobody can reserve until it is resumed." in said
    assert "price typo" in page.locator(".fg-switch").inner_text()
    # back on the change page with its fields as they are, no form errors
    assert re.search(rf"/admin/shop/drop/{drop.pk}/change/$", page.url)
    assert page.input_value("#id_title") == "Halted sale"
    assert page.input_value("#id_slug") == "halted"
    assert page.input_value("#id_quantity") == "10"
    assert page.locator(".errorlist, .errornote").count() == 0

    # when the merchant resumes
    page.get_by_role("button", name="Resume sale").click()
    page.wait_for_selector(".fg-switch:not(.is-paused)")

    # then the sale is live again and the resume is recorded
    resumed = Drop.objects.get(pk=drop.pk)
    assert (resumed.state, resumed.paused) == ("live", False)
    assert PauseEvent.objects.filter(drop=drop, action=PauseAction.RESUMED).count() == 1
    assert "The sale of Halted sale (halted) is on again" in page.locator(".messagelist").inner_text()
    assert page.input_value("#id_title") == "Halted sale"
    assert page.locator(".errorlist, .errornote").count() == 0
