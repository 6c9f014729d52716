"""The API docs page: Swagger UI from the package's own static files, reading the published schema."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_docs_page_is_html_that_reads_the_published_schema() -> None:
    answer = Client().get("/docs/api/")

    assert answer.status_code == 200 and answer["Content-Type"].startswith("text/html")
    html = answer.content.decode()
    assert 'data-schema-url="/api/openapi.json"' in html
    assert Client().get("/api/openapi.json").json()["openapi"].startswith("3.")


def test_swagger_ui_comes_from_this_shop_not_a_cdn() -> None:
    html = Client().get("/docs/api/").content.decode()

    sources = re.findall(r'(?:src|href)="([^"]+\.(?:js|css))"', html)
    assert any("swagger-ui-bundle.js" in s for s in sources) and any("swagger-ui.css" in s for s in sources)
    for source in sources:
        assert source.startswith("/static/"), source
        assert finders.find(source.removeprefix("/static/")), f"{source} is not a static file we ship"


def test_every_page_links_the_docs() -> None:
    html = Client().get("/").content.decode()

    assert 'href="/docs/api/"' in html


@pytest.mark.parametrize("method", ["post", "put", "delete"])
def test_the_docs_page_only_answers_reads(method: str) -> None:
    assert getattr(Client(), method)("/docs/api/").status_code == 405
