"""The admin in the merchant's language: no word of ours in an admin template outside the translation
tags, no admin or model word a plain literal, and the admin's pages in German for a German merchant."""

from __future__ import annotations

import ast
import html
import json
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from devtools import po
from tests.checkout.helpers import confirmed_order
from tests.factories import make_drop
from tests.storefront.test_i18n import TEMPLATES, WORD, untranslated

BASE = Path(settings.BASE_DIR)
# Where the merchant's words are written in Python: every app's models and admin modules.
SOURCES = sorted(
    p
    for p in [*BASE.glob("*/models.py"), *BASE.glob("*/admin.py"), *BASE.glob("*/*_admin.py")]
    if ".venv" not in p.parts
)
GETTEXT = {"_", "gettext", "gettext_lazy", "ngettext", "ngettext_lazy", "pgettext", "pgettext_lazy"}
# Keyword arguments and class attributes that a person reads in the admin.
SHOWN_KEYWORDS = {
    "verbose_name",
    "verbose_name_plural",
    "help_text",
    "description",
    "short_description",
    "label",
    "violation_error_message",
}
SHOWN_ATTRIBUTES = {"verbose_name", "verbose_name_plural", "short_description", "title", "site_title"}
# Calls whose nth argument is a message shown to the merchant.
MESSAGE_CALLS = {"message_user": 1, "success": 1, "error": 1, "warning": 1, "info": 1, "add_error": 1}


def _bare_words(node: ast.AST | None) -> list[ast.expr]:
    """The string literals with words in them in an expression, except inside a gettext call or as a
    dict's key (a placeholder's name in gettext("...%(n)s") % {"n": ...})."""
    if node is None:
        return []
    if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in GETTEXT:
        return []
    if isinstance(node, ast.Constant):
        return [node] if isinstance(node.value, str) and WORD.search(node.value) else []
    if isinstance(node, ast.JoinedStr):
        literal = "".join(
            v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
        return [node] if WORD.search(literal) else []
    if isinstance(node, ast.Dict):
        return [found for value in node.values for found in _bare_words(value)]
    if isinstance(node, ast.Subscript):  # data["quantity"]: a key, not a word
        return _bare_words(node.value)
    return [found for child in ast.iter_child_nodes(node) for found in _bare_words(child)]


def unwrapped(source: str) -> list[str]:
    """The merchant's words in a models or admin module that no gettext call wraps, as "line: text"."""
    found: list[ast.expr] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in SHOWN_KEYWORDS:
            found += _bare_words(node.value)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                name = getattr(target, "id", getattr(target, "attr", ""))
                if name in SHOWN_ATTRIBUTES and isinstance(node.value, ast.Constant | ast.JoinedStr):
                    found += _bare_words(node.value)
                elif name == "fieldsets" and isinstance(node.value, ast.List | ast.Tuple):
                    # (title, {"fields": [...]}): the title is read, the field names are not
                    titles = [e.elts[0] for e in node.value.elts if isinstance(e, ast.Tuple) and e.elts]
                    found += [w for title in titles for w in _bare_words(title)]
        elif isinstance(node, ast.Call):
            called = getattr(node.func, "attr", getattr(node.func, "id", ""))
            at = MESSAGE_CALLS.get(called)
            if at is not None and len(node.args) > at:
                found += _bare_words(node.args[at])
            if called == "ValidationError" and node.args:
                found += _bare_words(node.args[0])
        elif isinstance(node, ast.ClassDef) and any(ast.unparse(b).endswith("Choices") for b in node.bases):
            for member in node.body:  # NAME = "value", "label": the label is read
                value = getattr(member, "value", None)
                if isinstance(member, ast.Assign) and isinstance(value, ast.Tuple) and len(value.elts) > 1:
                    found += _bare_words(value.elts[1])
    found.sort(key=lambda n: (n.lineno, n.col_offset))
    return [f"{n.lineno}: {ast.get_source_segment(source, n)}" for n in found]


def test_the_source_scan_catches_a_plain_literal() -> None:
    # the control: each kind of place, first plain (caught), then wrapped (not)
    plain = """
class Drop(models.Model):
    title = models.CharField(verbose_name="title", help_text="Shown to buyers.")
    class Meta:
        verbose_name_plural = "drops"
class State(models.TextChoices):
    LIVE = "live", "Live"
class DropAdmin(admin.ModelAdmin):
    fieldsets = [(None, {"fields": ["a"]}), ("When", {"fields": ["starts_at"]})]
    @admin.display(description="stock")
    def stock(self, drop): return drop.quantity
    @admin.action(description="Export orders")
    def export(self, request, queryset):
        self.message_user(request, f"{len(queryset)} exported")
        messages.error(request, "Not done.")
        raise forms.ValidationError("Wrong.")
    export.short_description = "Export"
"""
    assert [line.split(": ", 1)[1] for line in unwrapped(plain)] == [
        '"title"',
        '"Shown to buyers."',
        '"drops"',
        '"Live"',
        '"When"',
        '"stock"',
        '"Export orders"',
        'f"{len(queryset)} exported"',
        '"Not done."',
        '"Wrong."',
        '"Export"',
    ]
    wrapped = """
class Drop(models.Model):
    title = models.CharField(verbose_name=_("title"), help_text=_("Shown to buyers."), max_length=9)
class State(models.TextChoices):
    LIVE = "live", _("Live")
class DropAdmin(admin.ModelAdmin):
    fieldsets = [(None, {"fields": ["a"]}), (_("When"), {"fields": ["starts_at"]})]
    @admin.display(description=_("stock"))
    def stock(self, drop): return drop.quantity
    def export(self, request, queryset):
        count = len(queryset)
        self.message_user(request, ngettext("%(n)s exported", "%(n)s exported", count) % {"n": count})
        messages.error(request, f"{drop.slug}: {error.detail}")
        form.add_error("amount", str(error))
"""
    assert unwrapped(wrapped) == []


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(BASE)))
def test_every_admin_and_model_word_is_behind_gettext(path: Path) -> None:
    left = unwrapped(path.read_text())
    assert not left, f"{path.relative_to(BASE)}: not wrapped in gettext: {left}"


def admin_templates() -> list[Path]:
    return sorted((TEMPLATES / "admin").rglob("*.html"))


@pytest.mark.parametrize("path", admin_templates(), ids=lambda p: str(p.relative_to(TEMPLATES)))
def test_every_word_of_ours_in_an_admin_template_is_translatable(path: Path) -> None:
    left = untranslated(path.read_text())
    assert not left, f"{path.relative_to(TEMPLATES)}: outside {{% translate %}}: {left}"


def test_the_template_scan_sees_the_admin_templates() -> None:
    # the control: the admin's templates are scanned, and one English word in one would be caught
    names = {str(p.relative_to(TEMPLATES)) for p in admin_templates()}
    assert {"admin/base_site.html", "admin/shop/drop/dashboard.html", "admin/shop/drop/presale.html"} <= names
    source = (TEMPLATES / "admin/shop/drop/sales.html").read_text()
    assert untranslated(source) == []
    assert untranslated(source.replace('{% translate "Nothing sold yet." %}', "Nothing sold yet.")) == [
        "Nothing",
        "sold",
        "yet",
    ]


def our_english() -> set[str]:
    """Our catalogue's phrases whose German differs: none may be left on a German admin page."""
    phrases = set()
    for message in po.read(Path(settings.BASE_DIR) / "locale/de/LC_MESSAGES/django.po"):
        english = message.id[0] if isinstance(message.id, tuple | list) else message.id
        german = (message.string[0] if isinstance(message.string, tuple | list) else message.string) or ""
        text = re.split(r"%\(\w+\)s|\{\w*\}|<[^>]+>", english)  # the words between placeholders
        phrases |= {p.strip() for p in text if len(p.split()) >= 3 and p.strip() not in german}
    return phrases


def owner(language: str) -> Client:
    client = Client()
    user = get_user_model().objects.create_superuser(f"owner-{language}", "o@example.com", "pw-pw-pw-pw")
    client.force_login(user)
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = language
    return client


def pages(client: Client, urls: list[str]) -> dict[str, str]:
    shown = {}
    for url in urls:
        answer = client.get(url, HTTP_ACCEPT_LANGUAGE="en-US,en")  # the cookie beats the browser
        assert answer.status_code == 200, (url, answer.status_code)
        shown[url] = html.unescape(answer.content.decode())
    return shown


@pytest.mark.django_db
def test_a_german_merchant_reads_the_admin_in_german() -> None:
    drop = make_drop(slug="de-admin", quantity=400, buckets=4)
    confirmed_order(drop, quantity=2)
    urls = [
        "/admin/shop/drop/",
        f"/admin/shop/drop/{drop.pk}/change/",
        "/admin/checkout/order/",
        "/admin/shop/drop/dashboard/",
        f"/admin/shop/drop/{drop.pk}/sales/",
        f"/admin/shop/drop/{drop.pk}/presale/",
    ]
    german = pages(owner("de"), urls)
    english = pages(owner("en"), urls)

    drops, change, orders, dashboard = (german[u] for u in urls[:4])
    assert '<html lang="de"' in drops
    assert "Verkauf (UTC)" in drops and "Sale (UTC)" not in drops
    assert "398 von 400 übrig" in drops and "398 of 400 left" not in drops  # 2 sold
    assert "Für den nächsten Verkauf kopieren" in drops
    assert "Käufer und Warteraum" in change and "Buyers and waiting room" not in change
    assert "Verkauf jetzt pausieren" in change and "Pause sale now" not in change
    assert "Beginnt am" in change and "Starts at" not in change
    assert "Bestellungen" in orders and ">Orders<" not in orders
    assert "2 Stück, 20,00" in orders or "2 Stück, €20.00" in orders
    assert "Invarianten-Übersicht" in dashboard and "Invariant dashboard" not in dashboard
    matched = re.search(r'<script id="fg-words"[^>]*>(.*?)</script>', dashboard, re.S)
    assert matched
    words = json.loads(matched.group(1))
    assert words["columns"]["held"] == "reserviert" and words["state"]["paused"] == "Pausiert"

    # and none of our English phrases on any of them, where the English pages show them
    phrases = our_english()
    for url in urls:
        left = sorted(p for p in phrases if p in german[url])
        assert not left, (url, left)
        # the control: the English page shows some (the order list's words are single, checked above)
        assert url == "/admin/checkout/order/" or any(p in english[url] for p in phrases), url
    assert "Buyers and waiting room" in english[urls[1]] and "Invariant dashboard" in english[urls[3]]
    assert "Sale (UTC)" in english[urls[0]] and "398 of 400 left" in english[urls[0]]


@pytest.mark.django_db
def test_the_admin_follows_the_browser_and_has_the_shops_switcher() -> None:
    make_drop(slug="switched")
    client = Client()
    client.force_login(get_user_model().objects.create_superuser("switcher", "s@example.com", "pw-pw-pw-pw"))
    page = client.get("/admin/shop/drop/", HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9").content.decode()
    assert "Verkauf (UTC)" in page  # the browser's German, no cookie yet
    assert 'action="/i18n/setlang/"' in page and 'name="language" value="en"' in page
    assert 'class="current" aria-current="true">Deutsch' in page
    assert "<script" not in page.split('id="language-switcher"')[1].split("</form>")[0]  # CSP: a plain form

    answer = client.post("/i18n/setlang/", {"language": "en", "next": "/admin/shop/drop/"})
    assert answer.status_code == 302 and answer["Location"] == "/admin/shop/drop/"
    page = client.get("/admin/shop/drop/", HTTP_ACCEPT_LANGUAGE="de-DE,de").content.decode()
    assert "Sale (UTC)" in page and "Verkauf (UTC)" not in page  # the choice beats the browser

    login = Client().get("/admin/login/", HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert 'id="language-switcher"' in login  # switchable before logging in too
