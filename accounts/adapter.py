"""allauth's adapter for Floodgate: the client address as the rest of the shop reads it, and a
way in for accounts made before e-mail sign-up."""

from __future__ import annotations

from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.models import EmailAddress
from allauth.account.stages import EmailVerificationStage
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html

from admission import limits

VERIFY_STAGE = "allauth.account.stages.EmailVerificationStage"


class AccountAdapter(DefaultAccountAdapter):
    def get_client_ip(self, request: HttpRequest) -> str:
        """Sign-up and login limits count per address as the waiting room's do (behind the proxy
        only when TRUST_X_FORWARDED_FOR says there is one)."""
        return limits.client_ip(request)

    def get_login_stages(self) -> list[str]:
        stages: list[str] = super().get_login_stages()
        return [f"{__name__}.{VerifyOrAddEmailStage.__name__}" if s == VERIFY_STAGE else s for s in stages]


class VerifyOrAddEmailStage(EmailVerificationStage):
    """allauth's "verify your address first", except for an account that has no address at all
    (made by the old username sign-up): it logs in and is asked to add one, since nobody can
    verify an address that was never given."""

    def handle(self) -> tuple[HttpResponse | None, bool]:
        user = self.login.user
        if user is None or user.email or EmailAddress.objects.filter(user_id=user.pk).exists():
            return super().handle()
        messages.warning(
            self.request,
            format_html(
                "Your account has no e-mail address, so order confirmations cannot reach you. "
                '<a href="{}">Add one</a>.',
                reverse("account_email"),
            ),
        )
        return None, True
