"""Factories for catalogue, stock, buyers and orders."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test import Client
from django.utils import timezone

from catalogue import services
from checkout import outbox
from checkout.models import Order, OrderState
from holds import services as holds
from holds.models import Hold
from shop.models import Drop

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

_seq = itertools.count(1)


def make_drop(
    *,
    quantity: int = 100,
    starts_at: datetime | None = None,
    ends_at: datetime | None = None,
    mode: str = "buckets",
    buckets: int = 1,
    **options: Any,
) -> Drop:
    n = next(_seq)
    starts_at = starts_at or timezone.now() - timedelta(minutes=1)
    options.setdefault("join_work_bits", 0)  # the tests of the proof of work ask for it
    return services.create_drop(
        slug=str(options.pop("slug", f"drop-{n}")),
        quantity=quantity,
        starts_at=starts_at,
        ends_at=ends_at or starts_at + timedelta(hours=1),
        product_sku=str(options.pop("product_sku", f"SKU-{n}")),
        product_name=str(options.pop("product_name", f"Product {n}")),
        price_minor=int(options.pop("price_minor", 4900)),
        inventory_mode=mode,
        bucket_count=buckets,
        **options,
    )


def start_now(drop_id: int) -> None:
    """The drop started a second ago by the database's clock: the claims read now(), a test
    transaction's start, which a slow test's Python clock can be more than a second past."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        (now,) = cursor.fetchone()
    Drop.objects.filter(pk=drop_id).update(starts_at=now - timedelta(seconds=1))


def make_buyer(name: str | None = None, *, email: str | None = None, verified: bool = True) -> User:
    """A buyer who can log in (username or e-mail, password "correct horse battery"): their
    address is <name>@example.com unless given; email="" makes an account without one (it cannot
    log in to the shop, which asks for a verified address)."""
    username = name or f"buyer{next(_seq)}"
    address = f"{username}@example.com" if email is None else email
    user = get_user_model().objects.create_user(
        username=username, email=address, password="correct horse battery"
    )
    if address:
        EmailAddress.objects.create(user=user, email=address, verified=verified, primary=True)
    return user


def expire_in(hold_ids: list[int], seconds: float) -> None:
    """Make holds run out `seconds` from now (negative: already over), on the database clock.

    created_at moves back too: a CHECK keeps expires_at after it.
    """
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE holds_hold SET created_at = now() - interval '1 hour',"
            " expires_at = now() + make_interval(secs => %s) WHERE id = ANY(%s)",
            [seconds, list(hold_ids)],
        )


def merchant() -> Client:
    """A client signed in as a staff member of the Merchants group (the `roles` fixture makes it)."""
    user = get_user_model().objects.create_user("mira", password="pw-pw-pw-pw", is_staff=True)
    user.groups.add(Group.objects.get(name="Merchants"))
    client = Client()
    client.force_login(user)
    return client


def staff(name: str, *groups: str) -> User:
    """A staff account (password "pw-pw-pw-pw") in these groups (the `roles` fixture makes them)."""
    user = get_user_model().objects.create_user(username=name, password="pw-pw-pw-pw", is_staff=True)
    for group in groups:
        user.groups.add(Group.objects.get(name=group))
    return user


def inline_rows(page: TestResponse) -> dict[str, object]:
    """What an admin change page's inlines post unchanged (management forms, the rows shown), from
    the page's response: a test adds its changes on top."""
    data: dict[str, object] = {}
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        management = formset.management_form
        data |= {management.add_prefix(name): value for name, value in management.initial.items()}
        for form in formset.initial_forms:
            for name, field in form.fields.items():
                value = field.widget.format_value(form.initial.get(name, field.initial))
                if value is not None:
                    data[form.add_prefix(name)] = value
    return data


def confirmed_order(
    drop: Drop, buyer: User, *, key: str, amount_minor: int, quantity: int = 1, unit: str | None = None
) -> Order:
    """A paid order as the saga leaves it: the hold confirmed, the order row, its e-mail in the outbox."""
    hold = holds.reserve(
        drop=drop,
        buyer_id=buyer.pk,
        quantity=quantity,
        idempotency_key=key,
        unit=unit,
    ).hold
    assert holds.confirm(hold_id=hold.pk)
    order = Order.objects.create(
        hold=hold,
        buyer=buyer,
        drop=drop,
        quantity=quantity,
        amount_minor=amount_minor,
        currency="EUR",
        state=OrderState.CONFIRMED,
    )
    outbox.announce(order)
    return order


def drop_permission(codename: str = "view_drop") -> Permission:
    """A shop.Drop permission; made if a transactional test's flush took the permissions table with it."""
    kind = ContentType.objects.get_for_model(Drop)
    return Permission.objects.get_or_create(
        codename=codename, content_type=kind, defaults={"name": codename.replace("_", " ").capitalize()}
    )[0]


def size_of(hold: Hold) -> str:
    """The name of the hold's variant (size); the hold must have one."""
    assert hold.variant is not None, f"hold {hold.pk} has no variant"
    return hold.variant.name
