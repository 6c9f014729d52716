"""allauth's adapter for Floodgate: the client address as the rest of the shop reads it, and a
way in for accounts made before e-mail sign-up."""

from __future__ import annotations

from allauth.account.adapter import DefaultAccountAdapter
from django.http import HttpRequest

from admission import limits

VERIFY_STAGE = "allauth.account.stages.EmailVerificationStage"
# Named, not imported: allauth.account.stages must not load before allauth has (an import cycle).
OUR_VERIFY_STAGE = "accounts.stages.VerifyOrAddEmailStage"


class AccountAdapter(DefaultAccountAdapter):
    def get_client_ip(self, request: HttpRequest) -> str:
        """Sign-up and login limits count per address as the waiting room's do (behind the proxy
        only when TRUST_X_FORWARDED_FOR says there is one)."""
        return limits.client_ip(request)

    def get_login_stages(self) -> list[str]:
        stages: list[str] = super().get_login_stages()
        return [OUR_VERIFY_STAGE if s == VERIFY_STAGE else s for s in stages]
