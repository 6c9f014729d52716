"""Product pictures: only JPEG, PNG and WebP, known by their content, stored re-encoded under the
extension of what they are, and /media/ serves nothing else."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.test import Client
from PIL import Image, PngImagePlugin

from shop.models import Product
from tests.factories import merchant

pytestmark = pytest.mark.django_db

FORM = {"sku": "CAP", "name": "Cap", "description": "", "currency": "EUR", "image_url": "", "price": "19"}


def picture(kind: str, name: str, size: tuple[int, int] = (40, 30), **options: object) -> io.BytesIO:
    out = io.BytesIO()
    Image.new("RGB" if kind != "1" else "1", size, (200, 40, 40) if kind != "1" else 1).save(
        out, format=kind if kind != "1" else "PNG", **options
    )
    out.name = name
    out.seek(0)
    return out


@pytest.fixture
def media(settings, tmp_path: Path) -> Path:
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


@pytest.mark.parametrize(("kind", "name"), [("GIF", "cap.gif"), ("BMP", "cap.png"), ("TIFF", "cap.tiff")])
def test_a_picture_of_another_format_is_refused_by_its_content_and_nothing_is_kept(
    roles: None, media: Path, kind: str, name: str
) -> None:
    answer = merchant().post("/admin/shop/product/add/", {**FORM, "image": picture(kind, name)})

    assert answer.status_code == 200
    assert answer.context["adminform"].form.errors["image"] == [
        "This file is not a JPEG, PNG or WebP picture; save it as one of those."
    ]
    assert not Product.objects.exists() and not list(media.rglob("*.*"))


def test_a_jpeg_named_png_is_kept_and_served_as_the_jpeg_it_is(roles: None, media: Path) -> None:
    answer = merchant().post("/admin/shop/product/add/", {**FORM, "image": picture("JPEG", "Cap Photo.png")})

    product = Product.objects.get()
    served = Client().get(product.image.url)
    assert answer.status_code == 302
    assert product.image.name is not None
    assert product.image.name.startswith("products/cap-photo") and product.image.name.endswith(".jpg")
    assert served.status_code == 200 and served["Content-Type"] == "image/jpeg"
    assert served["X-Content-Type-Options"] == "nosniff"


def test_what_rides_along_in_a_png_is_left_behind_and_the_pixels_kept(roles: None, media: Path) -> None:
    text = PngImagePlugin.PngInfo()
    text.add_text("Comment", "<script>alert(1)</script>")
    upload = picture("PNG", "cap.png", pnginfo=text)
    upload = io.BytesIO(upload.getvalue() + b"<html>trailing payload</html>")
    upload.name = "cap.png"

    merchant().post("/admin/shop/product/add/", {**FORM, "image": upload})

    name = Product.objects.get().image.name
    assert name is not None
    stored = (media / name).read_bytes()
    assert b"<script>" not in stored and b"payload" not in stored
    with Image.open(io.BytesIO(stored)) as kept:
        assert (kept.format, kept.size, kept.getpixel((3, 3))) == ("PNG", (40, 30), (200, 40, 40))


def test_a_picture_of_too_many_pixels_is_refused(roles: None, media: Path) -> None:
    huge = picture("1", "huge.png", size=(9000, 5000))  # a small file of 45 million pixels

    answer = merchant().post("/admin/shop/product/add/", {**FORM, "image": huge})

    assert answer.status_code == 200 and "40 million pixels" in str(answer.context["adminform"].form.errors)
    assert not Product.objects.exists()


@pytest.mark.parametrize("name", ["page.html", "drawing.svg", "doc.pdf", "cap.gif", "noext"])
def test_media_serves_no_file_but_a_picture(media: Path, name: str) -> None:
    (media / "products").mkdir()
    (media / "products" / name).write_bytes(b"<html><script>alert(1)</script></html>")

    assert Client().get(f"/media/products/{name}").status_code == 404
