"""GET /metrics: Prometheus text for staff who may watch the sale (ops.access), DEBUG, or a
scraper holding METRICS_TOKEN."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

from admission import state
from checkout.selectors import disputes_by_state, payments_needing_attention
from core.metrics import Gauge, render_prometheus
from ops import access
from ops.metrics import database_gauges, draw_beacon_gauges, drop_gauges, drop_slugs, duty_gauges

# prometheus_client's generate_latest writes text format 0.0.4 (its CONTENT_TYPE_LATEST names a
# newer format in recent releases, so the type is spelled out).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def may_read_metrics(request: HttpRequest) -> bool:
    """DEBUG, staff who may watch the sale (ops.access), or `Authorization: Bearer <METRICS_TOKEN>`
    when one is set."""
    if settings.DEBUG:
        return True
    if access.may_watch(getattr(request, "user", None)):
        return True
    token: str = getattr(settings, "METRICS_TOKEN", "")
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    # compare_digest: the answer time must not tell how much of a guessed token was right;
    # bytes, because it refuses non-ASCII str and a header may carry any.
    given = raw.strip().encode("utf-8", "surrogateescape")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(given, token.encode())


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    if not may_read_metrics(request):
        return HttpResponse(
            "Metrics need a staff login that may view drops or 'Authorization: Bearer <METRICS_TOKEN>'.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    stuck = payments_needing_attention()
    payments = Gauge(
        "floodgate_payments_needing_attention",
        "Payments the provider refused to capture or void for good (alert above 0).",
        [({"state": state}, n) for state, n in stuck.items()],
    )
    disputes = Gauge(
        "floodgate_disputes",
        "Disputes (chargebacks) by state: needs_response and under_review are open, won and lost decided.",
        [({"state": state}, n) for state, n in disputes_by_state().items()],
    )
    gauges = [*drop_gauges(), payments, disputes, *database_gauges(), *duty_gauges(), *state.gauges()]
    gauges += draw_beacon_gauges()
    return HttpResponse(render_prometheus(drop_slugs=drop_slugs, extra=gauges), content_type=CONTENT_TYPE)
