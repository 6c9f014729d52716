"""allauth's adapter for Floodgate: the client address as the rest of the shop reads it."""

from __future__ import annotations

from allauth.account.adapter import DefaultAccountAdapter
from django.http import HttpRequest

from admission import limits


class AccountAdapter(DefaultAccountAdapter):
    def get_client_ip(self, request: HttpRequest) -> str:
        """Sign-up and login limits count per address as the waiting room's do (behind the proxy
        only when TRUST_X_FORWARDED_FOR says there is one)."""
        return limits.client_ip(request)
