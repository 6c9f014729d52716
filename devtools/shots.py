"""Walk the whole shop in Chromium and write a PNG of every page, at desktop and phone size, and
beside them the invoice PDF the buyer downloads.

Run by `python3 floodgate.py shots [FOLDER]` (devstack.run_shots), which starts the real store
(floodgate-web, Celery worker and beat, the simulated provider) on servers of its own and calls
`python -m devtools.shots --base URL --out FOLDER` against it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Page

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Playwright's sync API keeps an event loop in this thread; the few ORM calls here are sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

PASSWORD = "correct horse battery"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"]


@dataclass(frozen=True)
class Size:
    name: str
    width: int
    height: int
    mobile: bool
    timezone: str


SIZES = (
    Size("desktop", 1280, 800, False, "America/New_York"),
    Size("phone", 390, 844, True, "Europe/Berlin"),
)


def say(message: str) -> None:
    print(f"shots: {message}", flush=True)


def seed() -> int:
    """The shop to photograph: a live drop in sizes (one sold out, one dearer), one before its
    start with a waiting room, a seated drop, a buyer per screen size and an admin. Returns the
    live drop's id."""
    import django

    django.setup()
    from allauth.account.models import EmailAddress
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from catalogue import services
    from catalogue.management.commands.seed_demo import DEMO_DESCRIPTION, DEMO_SHOP, DEMO_SKU
    from holds import services as holds
    from shop import setup
    from shop.models import Product

    shop: dict[str, Any] = DEMO_SHOP  # configure's keyword arguments, of several types
    setup.configure(**shop)  # the pages as a merchant's shop shows them, not the software's
    now = timezone.now()
    common: dict[str, Any] = {
        "product_sku": DEMO_SKU,
        "product_name": "Harbour Lane Runner, launch edition",
        "price_minor": 12900,
    }
    sizes = [
        services.NewVariant("40", 20),
        services.NewVariant("41", 4),  # held by early buyers below: the picker shows it sold out
        services.NewVariant("42", 30),
        services.NewVariant("43", 26),
        services.NewVariant("44", 20, 13900),  # the largest size costs more
    ]
    live = services.create_drop(
        slug="runner",
        title="Harbour Lane Runner — launch edition",
        quantity=100,
        variants=sizes,
        bucket_count=4,
        starts_at=now - timedelta(minutes=5),
        ends_at=now + timedelta(hours=2),
        **common,
    )
    Product.objects.filter(sku=DEMO_SKU).update(description=DEMO_DESCRIPTION)
    users = get_user_model()
    forty_one = live.variants.get(name="41")
    for n in range(4):
        early = users.objects.create_user(f"early-{n}", f"early-{n}@floodgate.invalid", PASSWORD)
        holds.reserve(drop=live, buyer_id=early.pk, quantity=1, idempotency_key="k", variant=forty_one)
    services.create_drop(
        slug="runner-encore",
        title="Harbour Lane Runner — encore",
        quantity=250,
        bucket_count=4,
        waiting_room=True,
        # within the hour: its waiting room is open, so the page hands out the join's work
        starts_at=now + timedelta(minutes=45),
        ends_at=now + timedelta(hours=3),
        **common,
    )
    services.create_drop(
        slug="runner-restock",
        title="Harbour Lane Runner — restock",
        quantity=100,
        bucket_count=4,
        waiting_room=True,
        # days ahead: its room is not open yet, so the page offers a reminder for when it opens
        starts_at=now + timedelta(days=2),
        ends_at=now + timedelta(days=2, hours=3),
        **common,
    )
    services.create_drop(
        slug="front-row",
        title="Front row: the launch night",
        product_sku="FRONT-ROW",
        product_name="Launch night, front row seat",
        price_minor=4500,
        quantity=40,
        inventory_mode="units",
        unit_labels=[f"{row}{n}" for row in "ABCD" for n in range(1, 11)],
        per_buyer_limit=1,
        starts_at=now - timedelta(minutes=5),
        ends_at=now + timedelta(hours=2),
    )
    Product.objects.filter(sku="FRONT-ROW").update(
        description="One seat in the front row of the launch night. Choose yours on the seat map."
    )
    users.objects.create_superuser("admin", "admin@floodgate.invalid", PASSWORD)
    for size in SIZES:
        address = f"{size.name}@floodgate.invalid"
        shopper = users.objects.create_user(f"shopper-{size.name}", address, PASSWORD)
        # verified, as after following the sign-up link: the shop logs in no unverified address
        EmailAddress.objects.create(user=shopper, email=shopper.email, verified=True, primary=True)
    return live.pk


def chromium() -> str:
    path = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        sys.exit("shots: Chromium is missing (Debian's `chromium` package, or set CHROMIUM_PATH).")
    return path


class Walk:
    def __init__(self, page: Page, base: str, out: Path, size: Size) -> None:
        self.page, self.base, self.out, self.size = page, base, out / size.name, size
        self.out.mkdir(parents=True, exist_ok=True)
        self.count = 0

    def shot(self, name: str) -> None:
        self.count += 1
        path = self.out / f"{self.count:02d}-{name}.png"
        self.page.wait_for_load_state("networkidle")
        self.page.screenshot(path=str(path), full_page=True)
        say(f"{self.size.name:7} {path.relative_to(self.out.parent.parent)}  ({self.page.url})")

    def keep(self, name: str, content: bytes, suffix: str) -> None:
        """A file beside the pictures (a PDF Chromium cannot photograph headless), numbered with them."""
        self.count += 1
        path = self.out / f"{self.count:02d}-{name}{suffix}"
        path.write_bytes(content)
        say(f"{self.size.name:7} {path.relative_to(self.out.parent.parent)}  ({len(content)} bytes)")

    def go(self, path: str, name: str) -> None:
        self.page.goto(self.base + path)
        self.shot(name)

    def log_in(self, username: str, then: str, login: str = "/accounts/login/") -> None:
        self.page.goto(f"{self.base}{login}?next={then}")
        self.page.fill("input[name=username]", username)
        self.page.fill("input[name=password]", PASSWORD)
        self.page.locator("form [type=submit]").first.click()
        self.page.wait_for_url(re.compile(re.escape(then) + "$"))


def walk_buyer(walk: Walk, provider: str, drop_id: int) -> None:
    page = walk.page
    walk.go("/", "home")
    walk.go("/drops/runner/", "drop-live-visitor")
    walk.go("/accounts/signup/", "signup")
    page.goto(walk.base + "/accounts/login/")
    page.fill("input[name=username]", f"shopper-{walk.size.name}")
    page.fill("input[name=password]", "not the password")
    page.locator("form [type=submit]").first.click()
    page.wait_for_selector(".errorlist")
    walk.shot("login-refused")
    walk.go("/accounts/password/reset/", "password-reset")
    walk.log_in(f"shopper-{walk.size.name}", "/drops/runner/")
    walk.shot("drop-live")
    walk.go("/drops/runner-restock/", "drop-before-its-room")
    page.click("#remind-me")
    page.wait_for_selector("#forget-reminder")
    walk.shot("drop-reminder-asked")
    walk.go("/drops/runner-encore/", "drop-before-start")
    page.click("#join-queue")
    page.wait_for_url(re.compile(r"/queue/$"))
    walk.shot("waiting-room")
    walk.go("/drops/front-row/", "drop-seats")
    seat = "B4" if walk.size.name == "desktop" else "C7"  # each buyer a seat of their own
    page.locator(f"#seat-picker input[value={seat}]").check(force=True)
    page.click("#buy")
    page.wait_for_url(re.compile(r"/holds/\d+/$"))
    walk.shot("hold")
    page.click("#pay")
    page.wait_for_url(re.compile(re.escape(provider) + r"/pay/"))
    walk.shot("provider")
    page.click("#pay")
    page.wait_for_url(re.compile(r"/orders/\d+/$"))
    page.wait_for_selector("#order-state[data-state='confirmed']", timeout=30_000)
    walk.shot("order")
    # The invoice as the buyer downloads it from the order page (listed once the page is loaded
    # confirmed): saved beside its page's picture.
    page.reload()
    link = page.locator("#order-invoices a").first
    invoice = page.request.get(walk.base + str(link.get_attribute("href")))
    if not (invoice.ok and invoice.body().startswith(b"%PDF-")):
        sys.exit(f"shots: the order page's invoice is not a PDF ({invoice.status} {invoice.url})")
    walk.keep("invoice", invoice.body(), ".pdf")
    walk.go("/orders/", "orders")
    page.goto(walk.base + "/accounts/api/")
    page.click("button[value=create]")
    page.wait_for_selector("#api-token")
    walk.shot("api-access")
    walk.go("/terms/", "terms")
    for kind in ("withdrawal", "privacy", "notice"):
        walk.go(f"/legal/{kind}/", f"legal-{kind}")
    page.goto(walk.base + "/no/such/page/")
    walk.shot("not-found")


def walk_admin(walk: Walk, provider: str, drop_id: int) -> None:
    page = walk.page
    walk.log_in("admin", "/admin/", login="/admin/login/")
    walk.shot("admin-index")
    walk.go("/admin/shop/drop/", "admin-drops")
    walk.go("/admin/shop/shopsettings/", "admin-shop")  # the one Shop page (or its form, before it)
    walk.go(f"/admin/shop/drop/{drop_id}/change/", "admin-drop-change")
    page.locator("fieldset.collapse summary").first.click()  # the tuning a merchant rarely opens
    walk.shot("admin-drop-advanced")
    page.fill(".fg-switch input[name=reason]", "a look at the pause")
    page.locator(".fg-pause").click()  # by its class: the button reads in the browser's language
    page.wait_for_selector(".fg-switch.is-paused")
    walk.shot("admin-drop-paused")
    walk.go("/admin/shop/drop/dashboard/", "dashboard")
    walk.go(f"/admin/shop/drop/{drop_id}/presale/", "admin-drop-presale")
    walk.go(f"/admin/shop/drop/{drop_id}/sales/", "admin-drop-sales")
    page.goto(f"{walk.base}/admin/shop/drop/")
    page.locator("#result_list tr", has_text="Front row").locator("a.fg-sales-link").click()  # a seat sold
    walk.shot("admin-drop-sales-sold")
    page.goto(f"{walk.base}/admin/shop/drop/{drop_id}/change/")
    page.locator(".fg-resume").click()  # the next screen size buys from it
    page.wait_for_selector(".fg-switch:not(.is-paused)")
    walk.go("/admin/checkout/order/", "admin-orders")
    page.locator("#result_list tbody th a").first.click()
    walk.shot("admin-order")
    walk.go("/admin/shop/apitoken/", "admin-api-tokens")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", required=True)
    parser.add_argument("--provider", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--lang", default="", help="the browser's language (Accept-Language), e.g. de")
    args = parser.parse_args()
    drop_id = seed()
    from playwright.sync_api import sync_playwright

    started = time.monotonic()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium(), headless=True, args=CHROMIUM_FLAGS)
        for size in SIZES:
            shown = 0
            for walker in (walk_buyer, walk_admin):
                context = browser.new_context(
                    viewport={"width": size.width, "height": size.height},
                    device_scale_factor=2 if size.mobile else 1,
                    is_mobile=size.mobile,
                    has_touch=size.mobile,
                    timezone_id=size.timezone,  # the pages show the buyer's clock beside UTC
                    **({"locale": args.lang} if args.lang else {}),  # the shop answers in that language
                )
                context.set_default_timeout(20_000)
                walk = Walk(context.new_page(), args.base, args.out, size)
                walk.count = shown
                walker(walk, args.provider, drop_id)
                shown = walk.count
                context.close()
        browser.close()
    language = f" in {args.lang}" if args.lang else ""
    say(f"done{language} in {time.monotonic() - started:.0f} s: {args.out}/desktop and {args.out}/phone")


if __name__ == "__main__":
    main()
