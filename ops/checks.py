"""Deploy-time checks (`manage.py check --deploy`): a configuration that cannot take a payment, or
whose pages cannot render, is found before the first buyer finds it.

floodgate-web's start (config/web.py) runs the same checks (`report`) in a child process and
refuses to serve on the payment ones (START_REFUSES); a missing or stale static manifest is said
loudly there but does not stop the start (README, "Deploy-time checks").
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import ManifestFilesMixin
from django.core.checks import CheckMessage, Error, register
from django.core.files.storage import storages
from django.urls import Resolver404, resolve, reverse

from checkout import redirects, stripe_page, vapid
from core import env

TAG = "floodgate"
STRIPE_PAGE_NOT_ALLOWED = "floodgate.E001"
STRIPE_KEY_MISSING = "floodgate.E002"
STRIPE_KEY_WRONG = "floodgate.E003"
CARD_FALLBACK_REACHABLE = "floodgate.E004"
STATIC_MANIFEST_MISSING = "floodgate.E005"
STATIC_MANIFEST_STALE = "floodgate.E006"
WEB_PUSH_KEY_WRONG = "floodgate.E007"
# What floodgate-web refuses to start with: every payment of the drop would fail, or buyers' cards
# would go to something that is not Stripe.
START_REFUSES = frozenset(
    {STRIPE_PAGE_NOT_ALLOWED, STRIPE_KEY_MISSING, STRIPE_KEY_WRONG, CARD_FALLBACK_REACHABLE}
)
# Stripe's key prefixes (dashboard API keys: secret or restricted, publishable; a webhook
# endpoint's signing secret).
STRIPE_KEYS = {
    "STRIPE_SECRET_KEY": ("sk_", "rk_"),
    "STRIPE_PUBLISHABLE_KEY": ("pk_",),
    "STRIPE_WEBHOOK_SECRET": ("whsec_",),
}
SAMPLE_INTENT = "pi_0000000000000000"


@register(TAG, deploy=True)
def stripe_configuration(**_: Any) -> list[CheckMessage]:
    """With PAYMENT_PROVIDER=stripe: the buyer's pay page is an address checkout may send them
    to, and Stripe's three values are there and of their kind."""
    if settings.PAYMENT_PROVIDER != "stripe":
        return []
    found: list[CheckMessage] = []
    page = settings.PUBLIC_BASE_URL.rstrip("/") + reverse("stripe-pay", args=[SAMPLE_INTENT])
    if not redirects.allowed(page):
        found.append(
            Error(
                f"The shop's own Stripe pay page ({page}) is not an address "
                "PAYMENT_PROVIDER_PUBLIC_PREFIXES allows: every payment would answer 503 "
                "payment_unavailable.",
                hint=f"Add {redirects_entry(settings.PUBLIC_BASE_URL)} to PAYMENT_PROVIDER_PUBLIC_PREFIXES, "
                "or correct PUBLIC_BASE_URL.",
                id=STRIPE_PAGE_NOT_ALLOWED,
            )
        )
    modes = set()
    for name, prefixes in STRIPE_KEYS.items():
        value = str(getattr(settings, name, "") or "")
        if not value:
            found.append(
                Error(
                    f"{name} is not set, and PAYMENT_PROVIDER is stripe: no payment can be taken.",
                    hint="Copy it from Stripe's dashboard (API keys; Webhooks for the signing secret).",
                    id=STRIPE_KEY_MISSING,
                )
            )
        elif not value.startswith(prefixes):
            found.append(
                Error(
                    f"{name} does not look like one: Stripe's begin with {' or '.join(prefixes)}.",
                    hint="A key pasted into the wrong variable? Each has its place in Stripe's dashboard.",
                    id=STRIPE_KEY_WRONG,
                )
            )
        elif name != "STRIPE_WEBHOOK_SECRET":
            modes.add("test" if "_test_" in value else "live")
    if len(modes) > 1:
        found.append(
            Error(
                "STRIPE_SECRET_KEY and STRIPE_PUBLISHABLE_KEY are of different modes (one test, one live): "
                "Stripe.js could not confirm the intents the shop creates.",
                id=STRIPE_KEY_WRONG,
            )
        )
    return found


@register(TAG, deploy=True)
def web_push(**_: Any) -> list[CheckMessage]:
    """With WEB_PUSH_VAPID_KEY set (push on): a key of the shop's own that parses, and a contact
    the push services take. Unset, push is off and nothing is checked."""
    if not vapid.enabled():
        return []
    found: list[CheckMessage] = []
    hint = "Make one with `manage.py vapid_key`, or unset WEB_PUSH_VAPID_KEY to turn push off."
    if settings.WEB_PUSH_VAPID_KEY.strip() == env.DEV_VAPID_KEY:
        found.append(
            Error(
                "WEB_PUSH_VAPID_KEY is the published development value: anyone could sign the shop's pushes.",
                hint=hint,
                id=WEB_PUSH_KEY_WRONG,
            )
        )
    else:
        try:
            vapid.public_key()
        except Exception:  # py_vapid raises what the decoding and the curve raise
            found.append(
                Error(
                    "WEB_PUSH_VAPID_KEY is not a P-256 private key (base64url of its 32 bytes).",
                    hint=hint,
                    id=WEB_PUSH_KEY_WRONG,
                )
            )
    if not vapid.subject().startswith(("mailto:", "https://")):
        found.append(
            Error(
                f"The push services' contact ({vapid.subject()}) is neither mailto: nor https://: they "
                "refuse the shop's pushes.",
                hint="Set WEB_PUSH_SUBJECT=mailto:<the shop's address>, or unset it.",
                id=WEB_PUSH_KEY_WRONG,
            )
        )
    return found


@register(TAG, deploy=True)
def card_fallback(**_: Any) -> list[CheckMessage]:
    """The localstripe-only card endpoint must not answer in a deployment."""
    try:
        resolve(f"/checkout/stripe/{SAMPLE_INTENT}/card")
    except Resolver404:
        return []
    return [
        Error(
            f"The test-only card endpoint POST /checkout/stripe/<intent>/card is mounted, because "
            f"STRIPE_API_BASE ({settings.STRIPE_API_BASE}) is not Stripe's own API: buyers' cards would "
            "be confirmed through this server against something that is not Stripe.",
            hint="Unset STRIPE_API_BASE (and STRIPE_JS_URL): they are for tests against localstripe.",
            id=CARD_FALLBACK_REACHABLE,
        )
    ]


@register(TAG, deploy=True)
def static_manifest(**_: Any) -> list[CheckMessage]:
    """A manifest storage without its manifest (or with one older than the static files) makes
    every page a 500, the 500 page too: `{% static %}` cannot name a file it has no entry for."""
    storage = storages["staticfiles"]
    if not isinstance(storage, ManifestFilesMixin):
        return []  # dev's plain storage serves the files as they are
    hint = "Run `manage.py collectstatic --no-input` in the production profile (the Dockerfile does)."
    content = storage.read_manifest()
    if content is None:
        return [
            Error(
                f"The static files' manifest ({storage.manifest_name} in {settings.STATIC_ROOT}) is missing: "
                "every page, the error pages too, would answer 500.",
                hint=hint,
                id=STATIC_MANIFEST_MISSING,
            )
        ]
    try:
        listed = json.loads(content).get("paths", {})
    except (ValueError, AttributeError):
        listed = None
    if not isinstance(listed, dict):
        return [Error("The static files' manifest cannot be read.", hint=hint, id=STATIC_MANIFEST_MISSING)]
    missing = sorted(
        path
        for finder in finders.get_finders()
        for path, _storage in finder.list([])
        if path.replace("\\", "/") not in listed
    )
    if not missing:
        return []
    return [
        Error(
            f"The static files' manifest lacks {len(missing)} file(s) the shop has (first: {missing[0]}): "
            "a page naming one would answer 500.",
            hint=hint,
            id=STATIC_MANIFEST_STALE,
        )
    ]


def redirects_entry(base_url: str) -> str:
    """The allow-list entry that covers the shop's own pages: its origin."""
    return stripe_page.origin(base_url) or base_url


def report() -> None:
    """For floodgate-web's start: run the deploy checks and print each finding as a JSON line."""
    import django
    from django.core.checks import run_checks

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    out = sys.stdout
    for message in run_checks(include_deployment_checks=True, tags=[TAG]):
        said = {"id": message.id, "msg": message.msg, "hint": message.hint}
        # A laptop's run against localstripe (the dev profile) is told, not stopped.
        refuses = message.id in START_REFUSES and settings.PROFILE != "dev"
        out.write(json.dumps({**said, "refuses": refuses}) + "\n")
