"""The probe's staff findings (issue 43): a viewer of payments settled a refused capture (and
silenced its alert); staff without any permission read /metrics and the ops invariant API."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission, User
from django.test import Client

from checkout.models import Order, Payment, PaymentState
from checkout.selectors import payments_needing_attention
from holds import services as holds
from tests.factories import make_buyer, make_drop, staff

if TYPE_CHECKING:
    from django.test.client import _MonkeyPatchedWSGIResponse as TestResponse

pytestmark = pytest.mark.django_db


def refused_capture() -> Payment:
    drop = make_drop(slug="refused", quantity=2)
    buyer = make_buyer("cap")
    hold = holds.reserve(drop=drop, buyer_id=buyer.pk, quantity=1, idempotency_key="k").hold
    order = Order.objects.create(
        hold=hold, buyer=buyer, drop=drop, quantity=1, amount_minor=100, currency="EUR"
    )
    return Payment.objects.create(
        order=order, provider="simulated", amount_minor=100, currency="EUR", state=PaymentState.CAPTURE_FAILED
    )


def settle(client: Client, payment: Payment) -> TestResponse:
    form = {"action": "settled_at_the_provider", "_selected_action": [payment.pk]}
    return client.post("/admin/checkout/payment/", form, follow=True)


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_staff_who_may_only_view_payments_cannot_mark_a_refused_capture_settled() -> None:
    payment = refused_capture()
    viewer = get_user_model().objects.create_user("viewer", password=None, is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_payment"))

    answer = settle(logged_in(viewer), payment)

    payment.refresh_from_db()
    assert payment.state == PaymentState.CAPTURE_FAILED
    assert payments_needing_attention()["capture_failed"] == 1  # the alert still fires
    assert "settled_at_the_provider" not in answer.content.decode()  # not even offered


def test_control_on_call_marks_a_refused_capture_settled(roles: None) -> None:
    payment = refused_capture()

    answer = settle(logged_in(staff("ola", "On-call")), payment)

    payment.refresh_from_db()
    assert payment.state == "captured"
    assert "1 payment marked settled." in answer.content.decode()
    assert sum(payments_needing_attention().values()) == 0


def test_staff_without_a_permission_read_neither_metrics_nor_the_invariant(settings) -> None:
    settings.DEBUG = False
    make_drop(slug="watched", quantity=2)
    bare = logged_in(get_user_model().objects.create_user("bare", password=None, is_staff=True))

    metrics = bare.get("/metrics")
    numbers = bare.get("/api/ops/drops/watched/invariant")

    assert metrics.status_code == 403
    assert (numbers.status_code, numbers.json()["error"]) == (403, "forbidden")
    assert "view drops" in numbers.json()["detail"]


def test_control_merchants_and_on_call_read_metrics_and_the_invariant(roles: None, settings) -> None:
    settings.DEBUG = False
    make_drop(slug="watched", quantity=2)
    for client in (logged_in(staff("max", "Merchants")), logged_in(staff("ola", "On-call"))):
        assert client.get("/metrics").status_code == 200
        assert client.get("/api/ops/drops/watched/invariant").json()["drift"] == 0
