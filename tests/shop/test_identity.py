"""The shop's identity: set by `configure_shop` and on the admin's one Shop page, checked (VAT ID,
colour, e-mail, logo by content), read through shop.identity with Redis or without it."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, TestCase
from PIL import Image

from shop import checks, identity, pricing
from shop.models import LegalText, Product, ShopSettings
from tests.factories import inline_rows, merchant

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

pytestmark = pytest.mark.django_db

GOOD = [
    "--name",
    "Harbour Lane Sneakers",
    "--legal-name",
    "Harbour Lane GmbH",
    "--address",
    r"Hafenstraße 1\n20457 Hamburg",
    "--contact-email",
    "hello@harbour-lane.example",
]


def png(size: tuple[int, int] = (60, 20)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (10, 90, 200)).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def configure(*args: str) -> None:
    with TestCase.captureOnCommitCallbacks(execute=True):  # the caches follow the commit
        call_command("configure_shop", *GOOD, *args, stdout=io.StringIO())


def test_the_command_sets_the_identity_and_seeds_the_legal_pages(media: Path, tmp_path: Path) -> None:
    logo = tmp_path / "logo.png"
    logo.write_bytes(png())

    configure(
        "--vat-id", "de 123.456-789", "--logo", str(logo), "--accent-colour", "#AA3300",
        "--support-url", "https://help.harbour-lane.example/", "--prices-include-tax", "no",
    )  # fmt: skip

    shop = identity.current()
    assert shop.is_set and shop.name == "Harbour Lane Sneakers" and shop.legal_name == "Harbour Lane GmbH"
    assert shop.address_lines == ["Hafenstraße 1", "20457 Hamburg"]
    assert shop.vat_id == "DE123456789" and shop.accent_colour == "#aa3300"
    assert shop.logo_url.startswith("/media/shop/logo") and shop.logo_url.endswith(".png")
    assert shop.prices_include_tax is False
    assert LegalText.objects.count() == 8  # four pages in English and German
    notice = LegalText.objects.get(kind="notice", language="de").body
    assert "Harbour Lane GmbH" in notice and "DE123456789" in notice and "20457 Hamburg" in notice


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--vat-id", "hello"], "not a VAT ID"),
        (["--vat-id", "US123456789"], "not a VAT ID"),  # not an EU prefix
        (["--vat-id", "DEABCDEFGH"], "not a VAT ID"),  # no digit at all
        (["--contact-email", "not-an-address"], "valid email"),
        (["--contact-email", "a@b@example.com"], "valid email"),
        (["--accent-colour", "red"], "six hex digits"),
        (["--accent-colour", "#12345"], "six hex digits"),
        (["--support-url", "javascript:alert(1)"], "valid URL"),
        (["--name", "   "], "cannot be blank"),
        (["--legal-name", "x" * 161], "at most 160 characters"),
    ],
)
def test_the_command_refuses_garbage_and_changes_nothing(args: list[str], said: str) -> None:
    configure("--vat-id", "DE123456789")
    before = ShopSettings.objects.values().get()

    with pytest.raises(CommandError) as refused:
        configure(*args)

    assert said in str(refused.value) and "Nothing changed" in str(refused.value)
    assert ShopSettings.objects.values().get() == before


def test_the_command_refuses_an_e_mail_that_is_not_one_on_a_new_shop() -> None:
    with pytest.raises(CommandError, match="valid email"):
        call_command("configure_shop", *GOOD[:-1], "not-an-address", stdout=io.StringIO())

    assert not ShopSettings.objects.exists() and not identity.current().is_set


@pytest.mark.parametrize(
    ("name", "content", "said"),
    [
        (
            "logo.svg",
            b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>',
            "not a JPEG",
        ),
        ("logo.png", b"<html><body><script>alert(1)</script></body></html>", "not a JPEG"),
        ("logo.pdf", b"%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF", "not a JPEG"),
        ("big.png", png((3000, 3000)) + b"\0" * (1024 * 1024), "larger than 1 MB"),
    ],
)
def test_a_logo_that_is_not_a_small_picture_is_refused_and_nothing_changes(
    media: Path, tmp_path: Path, name: str, content: bytes, said: str
) -> None:
    configure()
    before = ShopSettings.objects.values().get()
    path = tmp_path / name
    path.write_bytes(content)

    with pytest.raises(CommandError, match=said):
        configure("--logo", str(path), "--name", "Renamed")

    assert ShopSettings.objects.values().get() == before
    assert not media.exists() or not any(media.rglob("*"))  # no file kept either


def test_the_admin_list_goes_straight_to_the_one_shop_page(roles: None) -> None:
    client = merchant()

    assert client.get("/admin/shop/shopsettings/")["Location"] == "/admin/shop/shopsettings/add/"
    configure()
    assert client.get("/admin/shop/shopsettings/")["Location"] == "/admin/shop/shopsettings/1/change/"
    page = client.get("/admin/shop/shopsettings/1/change/").content.decode()
    assert "They are templates, not legal advice" in page
    assert client.get("/admin/shop/shopsettings/add/").status_code == 403  # one shop only


def admin_form(page: TestResponse, **changes: object) -> dict[str, object]:
    form = page.context["adminform"].form
    data: dict[str, object] = {name: form.initial.get(name, "") for name in form.fields if name != "logo"}
    data["prices_include_tax"] = "on" if data.get("prices_include_tax") else ""
    return {**data, **inline_rows(page), **changes}


def test_a_merchant_sets_the_shop_up_in_the_admin(roles: None, media: Path) -> None:
    client = merchant()
    page = client.get("/admin/shop/shopsettings/add/")
    assert page.context["adminform"].form.initial["prices_include_tax"] is True  # PRICES_INCLUDE_TAX
    logo = io.BytesIO(png())
    logo.name = "mark.png"

    with TestCase.captureOnCommitCallbacks(execute=True):
        answer = client.post(
            "/admin/shop/shopsettings/add/",
            admin_form(
                page,
                name="Kiez Kicks",
                legal_name="Kiez Kicks UG",
                address="Reeperbahn 2\n20359 Hamburg",
                contact_email="moin@kiez.example",
                vat_id="DE 999 888 777",
                accent_colour="#00AA55",
                logo=logo,
            ),
        )

    assert answer.status_code == 302, answer.content.decode()[:3000]
    shop = identity.current()
    assert (shop.name, shop.vat_id, shop.accent_colour) == ("Kiez Kicks", "DE999888777", "#00aa55")
    assert shop.logo_url.endswith(".png")
    assert LegalText.objects.count() == 8
    # then the legal texts are edited on the same page, per language
    page = client.get("/admin/shop/shopsettings/1/change/")
    rows = inline_rows(page)
    text_of = {key: value for key, value in rows.items() if key.endswith("-body")}
    terms_de = next(key for key, value in text_of.items() if "Diese Bedingungen" in str(value))
    answer = client.post(
        "/admin/shop/shopsettings/1/change/", admin_form(page, **{terms_de: "## AGB\nUnsere eigenen Worte."})
    )
    assert answer.status_code == 302
    assert LegalText.objects.get(kind="terms", language="de").body == "## AGB\nUnsere eigenen Worte."


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("vat_id", "12345", "not a VAT ID"),
        ("vat_id", "DE<script>", "not a VAT ID"),
        ("contact_email", "nobody", "Enter a valid email address."),
        ("accent_colour", "blue", "six hex digits"),
        ("support_url", "javascript:alert(1)", "Enter a valid URL."),
        ("name", "", "This field is required."),
    ],
)
def test_the_admin_refuses_garbage_and_changes_nothing(
    roles: None, field: str, value: str, said: str
) -> None:
    configure("--vat-id", "DE123456789")
    before = ShopSettings.objects.values().get()
    client = merchant()
    page = client.get("/admin/shop/shopsettings/1/change/")

    answer = client.post("/admin/shop/shopsettings/1/change/", admin_form(page, **{field: value}))

    assert answer.status_code == 200 and said in answer.content.decode()
    assert ShopSettings.objects.values().get() == before


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("logo.svg", b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'),
        ("logo.html", b"<!doctype html><script>alert(1)</script>"),
        ("logo.pdf", b"%PDF-1.4\n%%EOF"),
        ("logo.png", png((3000, 3000)) + b"\0" * (1024 * 1024)),
    ],
)
def test_the_admin_refuses_a_logo_that_is_not_a_small_picture(
    roles: None, media: Path, name: str, content: bytes
) -> None:
    configure()
    before = ShopSettings.objects.values().get()
    client = merchant()
    page = client.get("/admin/shop/shopsettings/1/change/")
    upload = io.BytesIO(content)
    upload.name = name

    answer = client.post("/admin/shop/shopsettings/1/change/", admin_form(page, logo=upload, name="Renamed"))

    text = answer.content.decode()
    assert answer.status_code == 200
    # Django's image field's own word on a file Pillow cannot open, else shop.identity's
    said = ("Upload a valid image", "not a JPEG, PNG or WebP picture", "larger than 1 MB")
    assert any(words in text for words in said)
    assert ShopSettings.objects.values().get() == before
    assert not media.exists() or not any(media.rglob("*"))


def test_until_the_identity_is_set_the_admin_index_and_check_deploy_say_so(roles: None) -> None:
    client = merchant()

    assert 'id="shop-identity-notice"' in client.get("/admin/").content.decode()
    assert [m.id for m in checks.identity_is_set()] == [checks.IDENTITY_UNSET]
    assert checks.IDENTITY_UNSET in [m.id for m in run_checks(include_deployment_checks=True)]

    configure()

    assert 'id="shop-identity-notice"' not in client.get("/admin/").content.decode()
    assert checks.identity_is_set() == []


def test_prices_include_tax_is_the_shops_setting_starting_from_the_environment(settings) -> None:
    settings.PRICES_INCLUDE_TAX = True
    product = Product(price_minor=11900, tax_rate="19.00", currency="EUR")
    assert pricing.line(product, 1).gross_minor == 11900  # unset: the environment's word

    configure("--prices-include-tax", "no")
    assert pricing.line(product, 1).gross_minor == 14161  # the shop's: 119.00 net, 22.61 tax on top

    configure("--prices-include-tax", "yes")
    assert pricing.line(product, 1).gross_minor == 11900
    configure()  # left out: kept
    assert ShopSettings.objects.get().prices_include_tax is True


def test_the_identity_is_read_once_per_process_and_without_redis(settings, django_assert_num_queries) -> None:
    configure()
    identity.forget()
    with django_assert_num_queries(1):  # the row, once; then this process's copy
        for _ in range(5):
            assert identity.current().name == "Harbour Lane Sneakers"
    identity.forget()
    identity.current()  # Redis now holds it
    identity._local = None  # another process: Redis answers, no query
    with django_assert_num_queries(0):
        assert identity.current().name == "Harbour Lane Sneakers"

    # Redis away: the database row answers, and the shop still has its name
    settings.CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": "redis://127.0.0.1:9/0",  # nothing listens on the discard port
            "OPTIONS": {"SOCKET_CONNECT_TIMEOUT": 0.2, "SOCKET_TIMEOUT": 0.2},
        }
    }
    identity.forget()
    with django_assert_num_queries(1):
        assert identity.current().name == "Harbour Lane Sneakers"


def test_a_change_is_seen_at_once_by_the_process_that_made_it() -> None:
    configure()
    assert identity.current().name == "Harbour Lane Sneakers"

    with TestCase.captureOnCommitCallbacks(execute=True):
        call_command("configure_shop", *GOOD[:1], "Second Name", *GOOD[2:], stdout=io.StringIO())

    assert identity.current().name == "Second Name"


def test_the_public_pages_use_the_identity() -> None:
    configure()

    page = Client().get("/").content.decode()

    assert "<title>Harbour Lane Sneakers</title>" in page
    assert 'content="Harbour Lane Sneakers: limited drops' in page
    assert "<span>Harbour Lane Sneakers</span>" in page and "Harbour Lane GmbH" in page
    assert "--accent: #1f5fbf" in page


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("Harbour Lane Sneakers", "HARBOUR LA"),  # ten characters fit behind any account prefix
        ("Straßen-Kicks", "STRASSEN-K"),  # Latin only: ß spelt out, accents dropped
        ("Café Übel", "CAFE UBEL"),
        ('<"O\'Neil"*\\>', "O NEIL"),  # none of < > \ ' " * reaches the statement
        ("  Kiez   Kicks  ", "KIEZ KICKS"),
        ("A1 Shop", "A1 SHOP"),
        ("東京靴店", ""),  # nothing Latin left: the account's own descriptor alone
        ("2024 / 25", ""),  # no letter: refused by card networks, so not sent
    ],
)
def test_the_statement_descriptor_is_the_shops_name_as_a_card_statement_takes_it(
    name: str, shown: str
) -> None:
    descriptor = identity.statement_descriptor(name)

    assert descriptor == shown
    assert len(descriptor) <= identity.DESCRIPTOR_MAX and not set(descriptor) & set("<>\\'\"*")
