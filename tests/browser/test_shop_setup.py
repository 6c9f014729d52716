"""A merchant sets the shop up from nothing in the admin (name, logo, colour, legal texts in English
and German); then a buyer sees that shop on every page, in the HTML e-mail (rendered in Chromium and
photographed) and on the invoice (its text read back from the PDF). Never the software's name."""

from __future__ import annotations

import email
import email.policy
import io
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from PIL import Image
from pypdf import PdfReader

from devtools.ports import free_port
from shop.models import LegalText, ShopSettings
from tests.browser.helpers import reserve_from_the_drop_page
from tests.browser.test_accounts import MAILDIR
from tests.conftest import (
    PROVIDER_SECRET,
    TEST_DATA,
    Worker,
    app_env,
    start_process,
    stop,
    wait_for_port,
)
from tests.factories import make_buyer, make_drop

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NAME, LEGAL_NAME, VAT_ID = "Kiez Kicks", "Kiez Kicks UG", "DE999888777"
ACCENT, ACCENT_RGB = "#00aa55", (0, 170, 85)
LOGO_RGB = (200, 30, 120)  # a colour nothing else on the e-mail has: seen in the picture, the logo loaded
SOFTWARE = "Floodgate"
PHOTOS = TEST_DATA / "shots"


@pytest.fixture(autouse=True)
def reliable_provider(payment_provider: str) -> None:
    httpx.post(
        f"{payment_provider}/api/config",
        json={"latency_ms": 100, "failure_rate": 0, "duplicates": 1, "late_seconds": 0},
        headers={"Authorization": f"Bearer {PROVIDER_SECRET}"},
    ).raise_for_status()


@pytest.fixture
def admin_daphne(transactional_db: None, payment_provider: str) -> Iterator[str]:
    """The admin on a daphne of its own (its admin log caches content-type ids a flush renumbers),
    with the media folder live_daphne serves the logo from."""
    port = free_port()
    env = {**app_env(payment_provider, f"http://127.0.0.1:{port}"), "DB_POOL_MAX_SIZE": "4"}
    command = [str(Path(sys.executable).parent / "daphne"), "-b", "127.0.0.1", "-p", str(port)]
    process, log = start_process(f"daphne-shop-{port}", [*command, "config.asgi:application"], env)
    wait_for_port(port, process, log)
    yield f"http://127.0.0.1:{port}"
    stop(process)


def logo_file(folder: Path) -> Path:
    path = folder / "kiez-logo.png"
    Image.new("RGB", (120, 40), LOGO_RGB).save(path, format="PNG")
    return path


def set_up_the_shop(page: Page, base: str, logo: Path) -> None:
    """As a merchant does it: log in, fill the Shop page, save, then write the legal texts."""
    user = get_user_model().objects.create_user(username="mira", password="pw-pw-pw-pw-pw", is_staff=True)
    user.groups.add(*Group.objects.filter(name="Merchants"))
    page.goto(f"{base}/admin/login/")
    page.fill("#id_username", "mira")
    page.fill("#id_password", "pw-pw-pw-pw-pw")
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/admin/$"))
    assert page.locator("#shop-identity-notice").is_visible()  # nothing set yet: the admin says so

    page.goto(f"{base}/admin/shop/shopsettings/")
    page.wait_for_url(re.compile(r"/admin/shop/shopsettings/add/$"))
    page.fill("#id_name", NAME)
    page.set_input_files("#id_logo", str(logo))
    page.fill("#id_accent_colour", ACCENT)
    page.fill("#id_legal_name", LEGAL_NAME)
    page.fill("#id_address", "Reeperbahn 2\n20359 Hamburg")
    page.fill("#id_vat_id", VAT_ID)
    page.fill("#id_contact_email", "moin@kiez.example")
    page.click("input[name=_save]")
    page.wait_for_url(re.compile(r"/admin/"))
    assert ShopSettings.objects.get().name == NAME, page.content()[:3000]

    # The legal texts start as templates; the merchant writes their own terms in both languages.
    page.goto(f"{base}/admin/shop/shopsettings/1/change/")
    assert "templates, not legal advice" in page.content()
    boxes = page.evaluate("() => [...document.querySelectorAll('textarea')].map(t => [t.id, t.value])")
    english = next(box for box, text in boxes if text.startswith("These terms apply"))
    german = next(box for box, text in boxes if text.startswith("Diese Bedingungen gelten"))
    page.fill(f"#{english}", "## Our terms\nKiez Kicks sells sneakers. <script>window.pasted = 1</script>")
    page.fill(f"#{german}", "## Unsere AGB\nKiez Kicks verkauft Turnschuhe.")
    page.click("input[name=_save]")
    page.wait_for_url(re.compile(r"/admin/"))
    saved = LegalText.objects.get(kind="terms", language="de").body
    assert (
        saved.replace("\r\n", "\n") == "## Unsere AGB\nKiez Kicks verkauft Turnschuhe."
    )  # a form sends CRLF


def wait_until_served(base: str, words: str, timeout: float = 20) -> None:
    """Each process keeps the identity a few seconds (shop.identity.LOCAL_SECONDS)."""
    deadline = time.monotonic() + timeout
    while words not in httpx.get(f"{base}/", timeout=5).text:
        assert time.monotonic() < deadline, f"{base} still does not show {words!r}"
        time.sleep(0.5)


def shows_the_shop(page: Page) -> None:
    """The page names the shop, shows its logo (loaded) and colour and its seller, never the software."""
    where = page.url
    assert NAME in page.title(), where
    assert page.locator("header .brand span").inner_text() == NAME, where
    logo = page.locator("header .brand img.logo")
    assert logo.evaluate("img => img.complete && img.naturalWidth === 120"), where
    accent = page.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--accent')")
    assert accent.strip() == ACCENT, where
    assert LEGAL_NAME in page.locator("#footer-seller").inner_text() and VAT_ID in page.content(), where
    assert SOFTWARE not in page.content(), where


def mails_to(address: str) -> list[email.message.EmailMessage]:
    """The server's messages to `address`, read as bytes (its parts are 8-bit UTF-8)."""
    found = []
    for path in sorted(MAILDIR.glob("*.log")) if MAILDIR.exists() else []:
        for raw in path.read_bytes().split(b"-" * 79):
            if raw.strip():
                message = email.message_from_bytes(raw.strip(), policy=email.policy.default)
                if address in str(message["To"]):
                    found.append(message)
    return found


def confirmation_mail(address: str, timeout: float = 30) -> email.message.EmailMessage:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for message in mails_to(address):
            if any(part.get_filename() for part in message.iter_attachments()):
                return message
        time.sleep(0.5)
    raise AssertionError(f"no confirmation with an invoice mailed to {address}")


def pixels_near(picture: Image.Image, colour: tuple[int, int, int]) -> int:
    return sum(
        count
        for count, pixel in picture.convert("RGB").getcolors(maxcolors=1 << 24) or []
        if isinstance(pixel, tuple) and all(abs(a - b) <= 8 for a, b in zip(pixel, colour, strict=True))
    )


def pdf_text(pdf: bytes) -> str:
    assert pdf.startswith(b"%PDF-")
    reader = PdfReader(io.BytesIO(pdf))
    metadata = "\n".join(str(value) for value in (reader.metadata or {}).values())
    return "\n".join(p.extract_text() for p in reader.pages) + "\n" + metadata


def test_a_merchant_sets_up_the_shop_and_a_buyer_sees_it_everywhere(
    admin_daphne: str,
    live_daphne: str,
    live_store: str,
    payment_provider: str,
    celery_worker: Worker,
    browser: Browser,
    page: Page,
    roles: None,
    tmp_path: Path,
) -> None:
    # given a merchant's shop set up in the admin from nothing
    set_up_the_shop(page, admin_daphne, logo_file(tmp_path))
    logo_path = Path(ShopSettings.objects.get().logo.path)
    wait_until_served(live_daphne, NAME)
    make_drop(slug="kiez-runner", product_name="Kiez Runner", quantity=3, price_minor=8900)
    address = f"kim-{time.time_ns()}@example.com"  # the mail folder outlives a test
    make_buyer("kim", email=address)
    chromium = page.context.browser
    assert chromium is not None  # the page's context is the browser fixture's
    buyer = chromium.new_context()
    buyer.set_default_timeout(15_000)
    shop = buyer.new_page()
    try:
        # every page a buyer passes names the shop, with its logo and colour
        for path in ["/", "/drops/kiez-runner/", "/accounts/login/"]:
            shop.goto(live_daphne + path)
            shows_the_shop(shop)
        shop.goto(f"{live_store}/no/such/page/")  # DEBUG off there: the shop's own 404
        shows_the_shop(shop)
        for kind in ("privacy", "notice", "withdrawal", "terms"):
            shop.goto(f"{live_daphne}/legal/{kind}/")
            shows_the_shop(shop)
        assert "Kiez Kicks sells sneakers." in shop.locator("main").inner_text()  # the merchant's words
        assert "<script>window.pasted" in shop.locator("main").inner_text()  # shown as text, inert
        assert shop.evaluate("window.pasted") is None

        reserve_from_the_drop_page(shop, live_daphne, "kiez-runner", "kim")
        shows_the_shop(shop)
        assert shop.locator("#order-terms a[href='/legal/terms/']").count() == 1
        shop.click("#pay")
        shop.wait_for_url(re.compile(re.escape(payment_provider) + r"/pay/"))
        assert shop.locator("#statement").inner_text() == "KIEZ KICKS"  # the card statement's words
        shop.click("#pay")
        shop.wait_for_url(re.compile(r"/orders/\d+/$"))
        shop.wait_for_selector("#order-state[data-state=confirmed]", timeout=30_000)
        shop.reload()  # the invoice is listed on the order page as loaded confirmed
        shows_the_shop(shop)
        answer = shop.request.get(live_daphne + str(shop.locator("#order-invoices a").get_attribute("href")))
        assert answer.ok
        downloaded = answer.body()
        shop.goto(f"{live_daphne}/orders/")
        shows_the_shop(shop)

        # a German browser reads the merchant's German terms
        german = browser.new_context(locale="de-DE")
        terms = german.new_page()
        terms.goto(f"{live_daphne}/legal/terms/")
        assert "Kiez Kicks verkauft Turnschuhe." in terms.locator("main").inner_text()
        shows_the_shop(terms)
        german.close()
    finally:
        buyer.close()

    # the invoice, as downloaded and as attached, names the seller with number, VAT ID and amounts
    mail = confirmation_mail(address)
    ((attached,),) = [[part for part in mail.iter_attachments() if part.get_filename()]]
    assert downloaded == attached.get_content()
    invoice = pdf_text(attached.get_content())
    for words in ["INV-000001", LEGAL_NAME, "Reeperbahn 2", f"VAT ID: {VAT_ID}", "€89.00", NAME]:
        assert words in invoice, (words, invoice)
    assert SOFTWARE not in invoice

    # the HTML e-mail, rendered in Chromium and photographed: the logo loaded, the name and colour there
    assert str(mail["From"]).startswith(f"{NAME} <") and str(mail["Subject"]).startswith(f"[{NAME}] ")
    html_part, plain_part = mail.get_body(preferencelist=("html",)), mail.get_body(preferencelist=("plain",))
    assert html_part is not None and plain_part is not None
    html = html_part.get_content()
    assert SOFTWARE not in html and SOFTWARE not in plain_part.get_content()
    reader = browser.new_context(viewport={"width": 700, "height": 600})
    try:
        letter = reader.new_page()
        letter.set_content(html, wait_until="networkidle")
        assert letter.locator(f"img[alt='{NAME}']").evaluate(
            "img => img.complete && img.naturalWidth === 120"
        )
        shown = letter.locator("body").inner_text()
        assert (
            LEGAL_NAME in shown and "Total paid: €89.00" in shown and "Kiez Kicks UG · Reeperbahn 2" in shown
        )
        PHOTOS.mkdir(parents=True, exist_ok=True)
        photo = PHOTOS / "shop-setup-email.png"
        letter.screenshot(path=str(photo), full_page=True)
    finally:
        reader.close()
    picture = Image.open(photo)
    assert pixels_near(picture, ACCENT_RGB) > 600 * 40  # the header band in the shop's colour
    assert pixels_near(picture, LOGO_RGB) > 100 * 30  # the logo, loaded from the shop's own address
    logo_path.unlink(missing_ok=True)  # the media folder is the store's, shared with other runs
