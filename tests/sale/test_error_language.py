"""An error's `detail` in the buyer's language (issue 25), through every door: Django's views (the
language LocaleMiddleware picks), the edge and the claim lane (the same pick, without Django); the
`error` code and every other field the same in every language (docs/API.md)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy

from admission import refusals, state
from core.answers import error_body
from core.asgi import language
from core.errors import InvalidQuantity, NotStarted, SoldOut, fill
from holds.services import reserve
from tests.factories import make_buyer, make_drop
from tests.harness import BODY, EDGE, Reply, bearer, call, reserve_headers, run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_edge")]

GERMAN = {"accept-language": "de-DE,de;q=0.9,en;q=0.5"}


def through_edge(path: str, headers: dict[str, str], body: bytes = BODY) -> Reply:
    return run(lambda: call("POST", path, headers=headers, body=body))


def through_django(path: str, headers: dict[str, str], body: bytes = BODY) -> tuple[int, dict[str, Any]]:
    """The same request on Django's own path (its middleware, no edge nor lane in front)."""
    meta = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items() if k != "content-type"}
    answer = Client().post(path, data=body, content_type="application/json", **meta)  # type: ignore[arg-type]
    return answer.status_code, answer.json()


def test_not_started_says_it_in_german_at_the_edge_and_in_django_and_english_by_default() -> None:
    drop = make_drop(slug="later", starts_at=timezone.now() + timedelta(hours=1))
    auth = bearer("dora")
    state.refresh([drop.pk])
    opens = f"{drop.starts_at:%H:%M:%S}"
    path = "/api/drops/later/holds"

    german = through_edge(path, reserve_headers(auth, **GERMAN))
    english = through_edge(path, reserve_headers(auth, key="k2"))
    assert german.edge and english.edge  # the fast path answered both
    assert german.json()["detail"] == f"Dieser Drop öffnet um {opens} UTC."
    assert english.json()["detail"] == f"This drop opens at {opens} UTC."
    assert german.headers["content-language"] == "de" and english.headers["content-language"] == "en"
    # only the detail differs: the code, the status and every other field are the contract
    assert german.status == english.status == 425
    assert {**german.json(), "detail": ""} == {**english.json(), "detail": ""}
    assert german.json()["error"] == "not_started"

    # Django's own path answers the same, word for word, in each language
    assert through_django(path, reserve_headers(auth, **GERMAN)) == (425, german.json())
    assert through_django(path, reserve_headers(auth, key="k3")) == (425, english.json())


def test_the_switchers_cookie_beats_the_browser_and_an_unknown_language_is_english() -> None:
    drop = make_drop(slug="gone", quantity=1, per_buyer_limit=1)
    reserve(drop=drop, buyer_id=make_buyer("first").pk, quantity=1, idempotency_key="k")
    auth = bearer("eve")
    state.refresh([drop.pk])
    path = "/api/drops/gone/holds"
    cookie = {"cookie": f"{settings.LANGUAGE_COOKIE_NAME}=de", "accept-language": "en-US,en"}

    chosen = through_edge(path, reserve_headers(auth, **cookie))
    french = through_edge(path, reserve_headers(auth, **{"accept-language": "fr-FR,fr"}))
    assert chosen.edge and french.edge
    assert (
        (chosen.status, chosen.json()["error"])
        == (french.status, french.json()["error"])
        == (409, "sold_out")
    )
    assert chosen.json()["detail"].startswith("Ausverkauft.")
    assert french.json()["detail"] == "Sold out. Units come back if a buyer does not pay in time."
    # LocaleMiddleware picks the same for the same headers
    status, body = through_django(path, reserve_headers(auth, key="k2", **cookie))
    assert (status, body["error"]) == (409, "sold_out") and body["detail"].startswith("Ausverkauft")


def test_the_edges_constant_refusals_are_built_once_per_language() -> None:
    refusals._built.clear()
    sold_out = SoldOut(refusals.SOLD_OUT)
    german, again, english = (
        refusals.answer(sold_out, "de"),
        refusals.answer(sold_out, "de"),
        refusals.answer(sold_out, "en"),
    )
    assert german is again and german is not english  # cached, and per language
    assert "Ausverkauft" in german.body.decode() and "Sold out" in english.body.decode()
    assert set(refusals._built) == {("sold_out", "de"), ("sold_out", "en")}
    # a refusal with its own values (a start time) is built each time, never from another's cache
    later = NotStarted(fill(gettext_lazy("This drop opens at %(starts)s UTC."), starts="x"))
    assert refusals.answer(later, "de") is not refusals.answer(later, "de")


def test_the_request_language_is_decided_as_locale_middleware_does() -> None:
    def scope(**headers: str) -> dict[str, object]:
        return {"headers": [(k.encode(), v.encode()) for k, v in headers.items()]}

    assert language(scope()) == "en"
    assert language(scope(**{"accept-language": "de-AT,de;q=0.9"})) == "de"
    assert language(scope(**{"accept-language": "fr, de;q=0.5"})) == "de"  # the first it speaks
    assert language(scope(**{"accept-language": "fr"})) == "en"
    assert language(scope(cookie="django_language=de", **{"accept-language": "en"})) == "de"
    assert language(scope(cookie="django_language=xx", **{"accept-language": "de"})) == "de"
    assert language(scope(**{"accept-language": "*;q=1, de;q=0.5"})) == "en"  # as Django: "*" stops


def test_the_busy_page_speaks_the_buyers_language() -> None:
    page = refusals.busy_page("some-drop", "de").body.decode()
    assert '<html lang="de">' in page and "Sehr viel los" in page and "Zurück zum Drop" in page
    assert "very busy" in refusals.busy_page("some-drop", "en").body.decode()


def test_the_lane_answers_invalid_quantity_in_german_as_django_does() -> None:
    make_drop(slug="lane-de", quantity=5)
    auth = bearer("lena")
    path = "/api/drops/lane-de/holds"
    body = b'{"quantity": 0}'

    german = through_edge(path, reserve_headers(auth, **GERMAN), body)
    english = through_edge(path, reserve_headers(auth, key="k2"), body)
    assert (
        german.headers.get("x-floodgate-lane") == "hit" and english.headers.get("x-floodgate-lane") == "hit"
    )
    assert german.json() == {"error": "invalid_quantity", "detail": "quantity muss mindestens 1 sein."}
    assert english.json() == {"error": "invalid_quantity", "detail": "quantity must be at least 1."}
    assert through_django(path, reserve_headers(auth, key="k3", **GERMAN), body) == (422, german.json())
    assert EDGE.lane is not None


def test_control_a_detail_not_marked_for_translation_stays_english_in_german() -> None:
    # the proof the assertions above see the translation, not a German default
    with translation.override("de"):
        assert error_body(InvalidQuantity("quantity must be at least 1."))["detail"] == (
            "quantity must be at least 1."
        )


def test_a_storefront_flash_message_is_in_german() -> None:
    make_drop(slug="flash", starts_at=timezone.now() + timedelta(hours=1))
    client = Client()
    client.force_login(make_buyer("flo"))
    answer = client.post(
        "/drops/flash/buy",
        {"quantity": "1", "idempotency_key": "f1"},
        HTTP_ACCEPT_LANGUAGE="de",
        follow=True,
    )
    page = answer.content.decode()
    assert re.search(r"Dieser Drop öffnet um \d\d:\d\d:\d\d UTC\.", page), page[-2000:]
    assert "This drop opens at" not in page


def test_the_shops_404_says_the_missing_drop_in_german() -> None:
    page = Client().get("/drops/nirgends/", HTTP_ACCEPT_LANGUAGE="de")
    assert page.status_code == 404
    assert "Es gibt keinen Drop namens &#x27;nirgends&#x27;." in page.content.decode()
