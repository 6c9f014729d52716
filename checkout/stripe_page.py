"""What the buyer's Stripe pay page (`/checkout/stripe/<intent>`) may reach, and whether the
localstripe-only card fallback is mounted.

Stripe's integration security guide (docs.stripe.com/security/guide, "Content Security Policy")
lists what Stripe.js needs: its script from https://js.stripe.com and https://*.js.stripe.com,
frames from those two and from https://hooks.stripe.com (3-D Secure challenges and redirects),
and calls to https://api.stripe.com. The guide also lists https://maps.googleapis.com (script and
connect) for the Address Element's autocomplete; this page mounts only the Payment Element, and
Google's Maps API serves JSONP, a known way around a script-src list, so it stays out.

Pointed elsewhere (STRIPE_JS_URL at a stand-in such as localstripe, which serves its Stripe.js,
its API and its challenge from one origin), the page allows that origin and STRIPE_API_BASE's.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

JS_ORIGIN = "https://js.stripe.com"
API_ORIGIN = "https://api.stripe.com"
# Stripe's documented list for Stripe.js, the Payment Element and 3-D Secure.
STRIPE_DOCUMENTED = {
    "script-src": [JS_ORIGIN, "https://*.js.stripe.com"],
    "frame-src": [JS_ORIGIN, "https://*.js.stripe.com", "https://hooks.stripe.com"],
    "connect-src": [API_ORIGIN],
}


def origin(url: str) -> str:
    """scheme://host[:port] of `url` (lower-cased), "" when it has none."""
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.netloc:
        return ""
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def uses_stripes_own_api() -> bool:
    """True when the library talks to Stripe itself (STRIPE_API_BASE unset or Stripe's)."""
    return origin(settings.STRIPE_API_BASE or API_ORIGIN) == API_ORIGIN


def card_fallback_mounted() -> bool:
    """The token fallback (`POST /checkout/stripe/<intent>/card`) exists for localstripe's Stripe.js,
    which cannot confirm a PaymentIntent in the browser. Against Stripe it is never needed, and a
    card confirmed through our server is a path Stripe.js's own checks (3-D Secure, Radar's
    browser signals) do not see: it is mounted only where the API is not Stripe's own."""
    return not uses_stripes_own_api()


def page_csp() -> dict[str, list[str]]:
    """The sources the pay page adds to the shop's policy (config.settings CONTENT_SECURITY_POLICY)."""
    js = origin(settings.STRIPE_JS_URL)
    if js == JS_ORIGIN:
        return {name: list(sources) for name, sources in STRIPE_DOCUMENTED.items()}
    stand_in = list(dict.fromkeys(o for o in (js, origin(settings.STRIPE_API_BASE)) if o))
    return {"script-src": [js], "frame-src": stand_in, "connect-src": stand_in}
