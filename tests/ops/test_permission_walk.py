"""Staff may do only what their permissions say (issue 43): every ModelAdmin action, admin view,
ops API route and /metrics is found by walking the admin registry and the URL conf, then tried
as a staff user with no permission, with view-only (every view_* permission), and with each
single permission the door's row names, against TABLE.

Permission checks only ever ask "has this one?", so they are monotone: a user refused with every
permission but those of one clause of a row is refused with any subset of them too. So each door
is also tried with all permissions but each of its clauses (refused) and with one permission of
each clause (allowed); that covers every single permission without a request per permission and
door (about 130 x 60). One client, no server: the walk takes a few seconds.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.test import Client, RequestFactory
from django.urls import URLPattern, get_resolver, reverse

from config.urls import api_patterns
from tests.factories import make_drop

pytestmark = pytest.mark.django_db

Clause = frozenset[str]  # any one of these permissions meets it
Rule = tuple[Clause, ...] | None  # every clause met; () any staff; None nobody


def one(*permissions: str) -> Clause:
    return frozenset(permissions)


def look(label: str) -> Clause:
    """The admin's changelist: the model's view or change permission."""
    app, model = label.split(".")
    return one(f"{app}.view_{model}", f"{app}.change_{model}")


def delete(label: str) -> Rule:
    app, model = label.split(".")
    return (look(label), one(f"{app}.delete_{model}"))


def add(label: str) -> Rule:
    app, model = label.split(".")
    return (one(f"{app}.add_{model}"),)


NOBODY: Rule = None
WALKERS = itertools.count()
WATCH = one("shop.view_drop", "shop.pause_drop")  # ops.access: the dashboard, the invariant, /metrics

TABLE: dict[str, Rule] = {
    # Django's and the libraries' own models
    "admin auth.group changelist": (look("auth.group"),),
    "admin auth.group add": add("auth.group"),
    "admin auth.group action delete_selected": delete("auth.group"),
    "admin auth.user changelist": (look("auth.user"),),
    "admin auth.user add": (one("auth.add_user"), one("auth.change_user")),  # Django's: the next page edits
    "admin auth.user action delete_selected": delete("auth.user"),
    "admin view auth_user_password_change": (one("auth.change_user"),),
    "admin auth.user action erase_personal_data": delete("auth.user"),  # GDPR erasure, on request
    "admin account.emailaddress changelist": (look("account.emailaddress"),),
    "admin account.emailaddress add": add("account.emailaddress"),
    "admin account.emailaddress action delete_selected": delete("account.emailaddress"),
    "admin account.emailaddress action make_verified": (
        look("account.emailaddress"),
        one("account.change_emailaddress"),
    ),
    "admin axes.accessattempt changelist": (look("axes.accessattempt"),),
    "admin axes.accessattempt add": NOBODY,
    "admin axes.accessattempt action delete_selected": delete("axes.accessattempt"),
    "admin axes.accessattempt action cleanup_expired_attempts": delete("axes.accessattempt"),
    "admin axes.accesslog changelist": (look("axes.accesslog"),),
    "admin axes.accesslog add": NOBODY,
    "admin axes.accesslog action delete_selected": delete("axes.accesslog"),
    "admin axes.accessfailurelog changelist": (look("axes.accessfailurelog"),),
    "admin axes.accessfailurelog add": NOBODY,
    "admin axes.accessfailurelog action delete_selected": delete("axes.accessfailurelog"),
    # orders and payments: the saga writes them
    "admin checkout.order changelist": (look("checkout.order"),),
    "admin checkout.order add": NOBODY,
    "admin view checkout_order_refund": (one("checkout.refund_order"),),
    "admin view checkout_order_cancel": (one("checkout.refund_order"),),  # the shop's cancel: money back
    "admin view checkout_order_ship": (one("checkout.ship_order"),),
    "admin view checkout_order_upload_tracking": (one("checkout.ship_order"),),
    "admin view checkout_order_buyer": (look("checkout.order"),),  # support: a buyer's history
    "admin checkout.order action shipping_list_csv": (look("checkout.order"),),
    "admin checkout.order action resend_confirmation": (look("checkout.order"),),
    "admin checkout.order action invoices_zip": (look("checkout.order"),),  # the accountant's export
    "admin view checkout_order_invoice": (look("checkout.order"),),
    "admin view checkout_order_export_invoices": (look("checkout.order"),),
    "admin checkout.dispute changelist": (look("checkout.dispute"),),
    "admin checkout.dispute add": NOBODY,
    "admin checkout.outboxmessage changelist": (look("checkout.outboxmessage"),),
    "admin checkout.outboxmessage add": NOBODY,
    "admin checkout.outboxmessage action delete_selected": delete("checkout.outboxmessage"),
    "admin checkout.payment changelist": (look("checkout.payment"),),
    "admin checkout.payment add": NOBODY,
    "admin checkout.payment action settled_at_the_provider": (
        look("checkout.payment"),
        one("checkout.settle_payment"),
    ),
    # the merchant's side
    "admin shop.product changelist": (look("shop.product"),),
    "admin shop.product add": add("shop.product"),
    "admin shop.product action delete_selected": delete("shop.product"),
    "admin shop.drop changelist": (look("shop.drop"),),
    "admin shop.drop add": add("shop.drop"),
    "admin shop.drop action delete_selected": delete("shop.drop"),
    "admin shop.drop action duplicate_drops": (look("shop.drop"), one("shop.add_drop")),
    "admin shop.drop action export_orders_csv": (look("shop.drop"), one("checkout.view_order")),
    "admin shop.drop action rehearse_drop": (look("shop.drop"), one("shop.rehearse_drop")),
    "admin view shop_drop_dashboard": (WATCH,),
    "admin view shop_drop_dashboard_data": (WATCH,),
    "admin view shop_drop_pause POST": (one("shop.pause_drop"),),
    "admin view shop_drop_resume POST": (one("shop.pause_drop"),),
    "admin view shop_drop_rehearsal": (look("shop.drop"),),
    "admin view shop_drop_rehearsal_report": (look("shop.drop"),),
    "admin view shop_drop_sales": (look("shop.drop"),),
    "admin view shop_drop_presale": (look("shop.drop"),),
    "admin view shop_drop_presale POST": (one("shop.change_drop"),),
    "admin view shop_drop_presale_codes": (look("shop.drop"),),
    "admin holds.discountcode changelist": (look("holds.discountcode"),),
    "admin holds.discountcode add": add("holds.discountcode"),
    "admin holds.discountcode action delete_selected": delete("holds.discountcode"),
    "admin fairness.report changelist": (look("fairness.report"),),
    "admin fairness.report add": NOBODY,
    "admin shop.shopsettings changelist": (look("shop.shopsettings"),),  # redirects to its one page
    "admin shop.shopsettings add": add("shop.shopsettings"),
    "admin shop.apitoken changelist": (look("shop.apitoken"),),
    "admin shop.apitoken add": add("shop.apitoken"),
    "admin shop.apitoken action delete_selected": delete("shop.apitoken"),
    "admin shop.pauseevent changelist": (look("shop.pauseevent"),),
    "admin shop.pauseevent add": NOBODY,
    "admin shop.pauseevent action delete_selected": delete("shop.pauseevent"),
    # the ops API and the scrape
    "api api-ops-invariant GET": (WATCH,),
    "api api-ops-pause POST": (one("shop.pause_drop"),),
    "api api-ops-resume POST": (one("shop.pause_drop"),),
    "api api-ops-refund POST": (one("checkout.refund_order"),),
    "metrics GET": (WATCH,),
}

# Admin views that change something answer POST; a GET there is a 405 for everyone.
VIEW_METHODS = {
    "shop_drop_pause": ("POST",),
    "shop_drop_resume": ("POST",),
    "shop_drop_presale": ("GET", "POST"),
}


@dataclass(frozen=True)
class Door:
    name: str
    method: str
    path: str
    data: dict[str, Any] = field(default_factory=dict)  # the form's or the JSON's
    action: bool = False  # an admin action: refused also means the changelist came back instead


def doors(*, drop_id: int, slug: str) -> list[Door]:
    """Every door staff could knock on, found in the admin registry and the URL conf."""
    root = get_user_model().objects.create_superuser("walk-root", password=None)
    asked = RequestFactory().get("/")
    asked.user = root
    values = {
        "drop_id": drop_id,
        "report_id": 0,
        "order_id": 0,
        "invoice_id": 0,
        "buyer_id": 0,
        "id": "0",
        "slug": slug,
    }
    found = []
    for model, model_admin in admin.site._registry.items():
        label, prefix = model._meta.label_lower, f"{model._meta.app_label}_{model._meta.model_name}"
        changelist = reverse(f"admin:{prefix}_changelist")
        found.append(Door(f"admin {label} changelist", "GET", changelist))
        found.append(Door(f"admin {label} add", "GET", reverse(f"admin:{prefix}_add")))
        for name in model_admin.get_actions(asked):  # a superuser sees every action there is
            # a selection of no row: the action runs on nothing (nothing changes, nothing starts)
            data = {"action": name, "_selected_action": ["0"], "index": "0", "post": "yes"}
            found.append(Door(f"admin {label} action {name}", "POST", changelist, data, action=True))
        standard = {f"{prefix}_{suffix}" for suffix in ("changelist", "add", "history", "delete", "change")}
        for pattern in model_admin.get_urls():
            if isinstance(pattern, URLPattern) and pattern.name and pattern.name not in standard:
                kwargs = {key: values[key] for key in pattern.pattern.converters}
                path = reverse(f"admin:{pattern.name}", kwargs=kwargs)
                for method in VIEW_METHODS.get(pattern.name, ("GET",)):
                    suffix = " POST" if method == "POST" else ""
                    found.append(Door(f"admin view {pattern.name}{suffix}", method, path))
    for top in get_resolver().url_patterns:
        if str(top.pattern) == "metrics":
            found.append(Door("metrics GET", "GET", "/metrics"))
    for route in api_patterns:
        if route.name and route.name.startswith("api-ops-"):
            path = reverse(route.name, kwargs={key: values[key] for key in route.pattern.converters})
            allow = Client().options(path)["Allow"]  # the api decorator names what it answers
            for method in sorted(set(allow.split(", ")) - {"HEAD"}):
                found.append(Door(f"api {route.name} {method}", method, path, {"reason": "walked"}))
    root.delete()
    return found


def allowed(door: Door, answer: object) -> bool:
    status = answer.status_code  # type: ignore[attr-defined]
    assert status < 500, (door, status)
    if status in (401, 403):
        return False
    if door.action:
        said = [str(m) for m in get_messages(answer.wsgi_request)]  # type: ignore[attr-defined]
        changelist = status == 200 and answer["Content-Type"].startswith("text/html")  # type: ignore[index]
        return not changelist and "No action selected." not in said
    return True


def met(rule: Rule, held: frozenset[str]) -> bool:
    return rule is not None and all(clause & held for clause in rule)


def trials(rule: Rule, every: frozenset[str]) -> list[tuple[str, frozenset[str]]]:
    """The permission sets a door is tried with, named: none, view-only, each single permission its
    row names, one of each clause, and all but each clause (all, for a door nobody may use)."""
    view_only = frozenset(p for p in every if p.split(".", 1)[1].startswith("view_"))
    sets = [("none", frozenset()), ("view-only", view_only)]
    if rule is None:
        return [*sets, ("all", every)]
    named = sorted(frozenset().union(*rule)) if rule else []
    sets += [(f"only {p}", frozenset({p})) for p in named]
    for combo in itertools.product(*(sorted(c) for c in rule)):
        sets.append((f"one of each: {', '.join(combo)}", frozenset(combo)))
    sets += [(f"all but {', '.join(sorted(clause))}", every - clause) for clause in rule]
    unique: dict[frozenset[str], str] = {}
    for said, held in sets:
        unique.setdefault(held, said)  # a single permission is often also "one of each"
    return [(said, held) for held, said in unique.items()]


def coverage(found: list[Door], table: dict[str, Rule]) -> list[str]:
    """Doors without a row, and rows without a door."""
    names = {d.name for d in found}
    wrong = [f"{name}: no row in the table" for name in sorted(names - set(table))]
    return wrong + [f"{name}: in the table, but no such door" for name in sorted(set(table) - names)]


def walk(found: list[Door], table: dict[str, Rule]) -> list[str]:
    """Knock on each door with each trial's staff user; the mismatches with the table, in words."""
    permissions = {
        f"{p.content_type.app_label}.{p.codename}": p
        for p in Permission.objects.select_related("content_type")
    }
    every = frozenset(permissions)
    plan: dict[frozenset[str], tuple[str, list[Door]]] = {}
    for door in found:
        for said, held in trials(table[door.name], every):
            plan.setdefault(held, (said, []))[1].append(door)
    client, wrong = Client(), []
    for held, (said, knocking) in plan.items():
        user = get_user_model().objects.create_user(f"walker{next(WALKERS)}", password=None, is_staff=True)
        user.user_permissions.set([permissions[p] for p in held])
        client.force_login(user)
        for door in knocking:
            client.cookies.pop("messages", None)  # an earlier door's message would read as this one's
            send = client.post if door.method == "POST" else client.get
            if door.name.startswith("api "):
                answer = send(door.path, door.data, content_type="application/json")
            else:
                answer = send(door.path, door.data)
            expected, got = met(table[door.name], held), allowed(door, answer)
            if expected != got:
                wrong.append(
                    f"{door.name} with {said}: {'allowed' if got else 'refused'} ({answer.status_code}),"
                    f" the table says {'allowed' if expected else 'refused'}"
                )
    return wrong


@pytest.fixture
def found() -> list[Door]:
    drop = make_drop(slug="walked", quantity=3)
    return doors(drop_id=drop.pk, slug=drop.slug)


@pytest.mark.slow
def test_every_door_lets_in_exactly_whom_the_table_says(found: list[Door], settings) -> None:
    settings.DEBUG = False  # /metrics is open to anyone under DEBUG
    missing = coverage(found, TABLE)
    assert not missing, "\n".join(missing)
    wrong = walk(found, TABLE)
    assert not wrong, "\n".join(wrong)


def test_control_a_permission_taken_from_the_table_is_caught(found: list[Door], settings) -> None:
    settings.DEBUG = False
    # given the table without On-call's way to the dashboard, and one without the settle permission
    watch_without_pause = {**TABLE, "admin view shop_drop_dashboard": (one("shop.view_drop"),)}
    settle_by_viewing = {
        **TABLE,
        "admin checkout.payment action settled_at_the_provider": (look("checkout.payment"),),
    }
    doors_of = {d.name: d for d in found}

    # when each is walked at that door
    wrong_dashboard = walk([doors_of["admin view shop_drop_dashboard"]], watch_without_pause)
    wrong_settle = walk(
        [doors_of["admin checkout.payment action settled_at_the_provider"]], settle_by_viewing
    )

    # then the walk names the permission the code grants and the table no longer does
    assert any("with all but shop.view_drop: allowed" in line for line in wrong_dashboard), wrong_dashboard
    assert any("with only checkout.view_payment: refused" in line for line in wrong_settle), wrong_settle
