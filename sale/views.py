"""Pages: buy from the drop page, watch a hold count down, release it."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

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
from holds.models import MORE_TIME_MAX, Hold, HoldState
from inventory import selectors as stock
from sale import addresses, entry
from shop import shipping
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
        result = entry.reserve_through_django(
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
        "price": order.charge if order is not None else selectors.hold_total(found),
        "each_minor": (
            found.exchange_price_minor  # an offer of a unit on the exchange: its seller's price
            if found.exchange_price_minor is not None
            else found.variant.unit_price(product)
            if found.variant
            else product.price_minor
        ),
        # An ended hold offers "reserve again" while the drop still has units on sale.
        "on_sale": state in {"released", "expired"} and catalogue.on_sale(found.drop),
        # A code may be entered while held and before payment starts (the price is fixed then).
        "takes_discount": state == "held"
        and not (found.extended or found.exchange)
        and found.discount_code_id is None,
        "discounted": selectors.hold_price(found) if found.discount_code_id is not None else None,
    }
    if state == "held":
        # Warned with time to act (WCAG 2.2.1: 20 s at least), at most a third of the first window before.
        first_window = (found.expires_at - found.created_at).total_seconds() / (1 + found.more_time / 2)
        context["warn_seconds"] = int(max(20, min(60, first_window / 3)))
        context["more_time_left"] = 0 if found.extended else MORE_TIME_MAX - found.more_time
    if state == "held" and not (found.extended or found.exchange) and catalogue.on_sale(found.drop):
        context["sizes"] = sizes_for(found)
    if product.ships and found.shipping_address_id is None and state == "held":
        context["shipping_from"] = shipping.lowest_fee(product)  # the zone is known with the address
    if product.ships and state == "held":
        # The hold's own address, else the account's last one to confirm (a new drop, same buyer).
        suggested = found.shipping_address or addresses.last_address(buyer_id=signed_in(request))
        context["address_form"] = form or AddressForm(initial=initial_from(suggested))
    return render(request, "holds/hold.html", context, status=400 if form is not None else 200)


@dataclass(frozen=True)
class SizeChoice:
    name: str
    price_minor: int
    left: int
    current: bool


def sizes_for(found: Hold) -> list[SizeChoice]:
    """The variants a held hold of a drop in sizes may change to, in order, each with its price and
    what is left of it (a size with fewer than the hold's units is shown, not offered); [] for one."""
    sizes = stock.variants_with_stock([found.drop_id])
    if len(sizes) < 2:
        return []
    product = found.drop.product
    return [SizeChoice(v.name, v.unit_price(product), left, v.pk == found.variant_id) for v, left in sizes]


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
def more_time(request: HttpRequest, hold_id: int) -> HttpResponse:
    """ "I need more time" pressed without the page's script: the hold page again, with its new time."""
    try:
        found = selectors.hold_of_buyer(hold_id=hold_id, buyer_id=signed_in(request))
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    try:
        services.more_time(hold=found, buyer_id=signed_in(request))
    except FloodgateError as error:
        messages.error(request, error.detail)
    return redirect("hold", hold_id=found.pk)


@require_POST
@login_required
def size(request: HttpRequest, hold_id: int) -> HttpResponse:
    """Another size chosen on the hold page: the hold changed to it, or refused with the hold as it was."""
    try:
        found = selectors.hold_of_buyer(hold_id=hold_id, buyer_id=signed_in(request))
    except NotFound as error:
        raise Http404(str(error.detail)) from None
    try:
        changed = services.change_variant(
            hold=found, buyer_id=signed_in(request), name=request.POST.get("variant")
        )
    except FloodgateError as error:
        messages.error(request, error.detail)
    else:
        size = changed.variant.name if changed.variant is not None else ""
        messages.success(request, _("Changed to %(size)s.") % {"size": size})
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
