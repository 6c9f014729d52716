"""Payment provider adapters by name: `get_provider("simulated")`."""

from __future__ import annotations

import importlib
from typing import cast

from checkout.providers.base import PaymentProvider

# Dotted paths imported on first use: the simulator process imports checkout.providers.signing
# and must not load Django through this package.
PROVIDERS: dict[str, str] = {
    "simulated": "checkout.providers.simulated:SimulatedProvider",
    "stripe": "checkout.providers.stripe:StripeProvider",
}


def get_provider(name: str) -> PaymentProvider:
    """Return a new adapter for the provider called name; raises KeyError for an unknown name."""
    try:
        path = PROVIDERS[name]
    except KeyError:
        raise KeyError(f"unknown payment provider {name!r}; known: {', '.join(sorted(PROVIDERS))}") from None
    module, _, attribute = path.partition(":")
    return cast(PaymentProvider, getattr(importlib.import_module(module), attribute)())
