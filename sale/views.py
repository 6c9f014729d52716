"""Pages: buy from the drop page, watch a hold count down, release it."""

from __future__ import annotations

import contextlib

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from catalogue import selectors as catalogue
from core import clients
from core.api import signed_in
from core.errors import FloodgateError, NotAdmitted, NotFound
from holds import discounts, selectors, services
from holds.models import Hold, HoldState
from sale import addresses, entry
from shop.addresses import AddressForm, initial_from


@require_POST
@login_required
def buy(request: HttpRequest, slug: str) -> HttpResponse:
    unit = request.POST.get("unit") or None
    # The page says so: choosing a seat reserves that one seat, whatever the quantity list shows.
    quantity: object = "1" if unit else request.POST.get("quantity", "1")
    with contextlib.suppress(ValueError):  # a non-number goes on; the service names the problem
        quantity = int(str(quantity))
    try:
        result = entry.reserve(
            entry.ReserveRequest(
                slug=slug,
                buyer_id=signed_in(request),
                client_ip=clients.client_ip(request),
                quantity=quantity,
                idempotency_key=request.POST.get("idempotency_key"),
                unit=unit,
                admission_token=request.POST.get("admission_token"),
                variant=request.POST.get("variant") or None,
                presale_code=request.POST.get("presale_code"),
                discount_code=request.POST.get("discount_code"),
            )
        )
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    except NotAdmitted as error:
        messages.info(request, error.detail)
        return redirect("drop-queue", slug=slug)
    except FloodgateError as error:
        active = error.extra.get("hold")
        if active:
            messages.info(request, error.detail)
            return redirect("hold", hold_id=active)
        messages.error(request, error.detail)
        return redirect("drop", slug=slug)
    return redirect(result.hold)


@login_required
def hold(request: HttpRequest, hold_id: int) -> HttpResponse:
    try:
        found = selectors.hold_of_buyer(hold_id=hold_id, buyer_id=signed_in(request))
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    return _hold_page(request, found)


def _hold_page(request: HttpRequest, found: Hold, form: AddressForm | None = None) -> HttpResponse:
    state = services.effective_state(found)
    order = getattr(found, "order", None)  # absent until payment starts
    product = found.drop.product
    context = {
        "hold": found,
        "state": state,
        "state_label": HoldState(state).label,
        "data": selectors.hold_json(found),
        "order": order,
        # Once payment started, the order's snapshot: what is charged even if the rate changed since.
        "price": order.price if order is not None else selectors.hold_price(found),
        "each_minor": found.variant.unit_price(product) if found.variant else product.price_minor,
        # An ended hold offers "reserve again" while the drop still has units on sale.
        "on_sale": state in {"released", "expired"} and catalogue.on_sale(found.drop),
        # A code may be entered while held and before payment starts (the price is fixed then).
        "takes_discount": state == "held" and not found.extended and found.discount_code_id is None,
        "discounted": selectors.hold_price(found) if found.discount_code_id is not None else None,
    }
    if product.ships and state == "held":
        # The hold's own address, else the account's last one to confirm (a new drop, same buyer).
        suggested = found.shipping_address or addresses.last_address(buyer_id=signed_in(request))
        context["address_form"] = form or AddressForm(initial=initial_from(suggested))
    return render(request, "holds/hold.html", context, status=400 if form is not None else 200)


@require_POST
@login_required
def address(request: HttpRequest, hold_id: int) -> HttpResponse:
    buyer = signed_in(request)
    try:
        addresses.give_address(hold_id=hold_id, buyer_id=buyer, data=request.POST.dict())
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    except addresses.InvalidAddress:
        found = selectors.hold_of_buyer(hold_id=hold_id, buyer_id=buyer)
        return _hold_page(request, found, AddressForm(request.POST))
    except FloodgateError as error:
        messages.error(request, error.detail)
        return redirect("hold", hold_id=hold_id)
    messages.success(request, _("Shipping address saved: the order will be sent there."))
    return redirect("hold", hold_id=hold_id)


@require_POST
@login_required
def discount(request: HttpRequest, hold_id: int) -> HttpResponse:
    """A discount code entered on the hold page: spent on the hold, or refused with the hold unchanged."""
    try:
        found = selectors.hold_of_buyer(hold_id=hold_id, buyer_id=signed_in(request))
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    try:
        discounts.apply_code(hold=found, buyer_id=signed_in(request), code=request.POST.get("discount_code"))
    except FloodgateError as error:
        messages.error(request, error.detail)
    else:
        messages.success(request, _("Discount code applied."))
    return redirect("hold", hold_id=found.pk)


@require_POST
@login_required
def release(request: HttpRequest, hold_id: int) -> HttpResponse:
    try:
        found = selectors.hold_of_buyer(hold_id=hold_id, buyer_id=signed_in(request))
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    if services.release(hold_id=found.pk, buyer_id=signed_in(request)):
        messages.success(request, _("Released. The units are back on sale."))
    else:
        messages.info(request, _("This hold had already ended."))
    return redirect(found.drop)
