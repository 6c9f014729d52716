"""allauth's adapter for Floodgate: the client address as the rest of the shop reads it, and a
way in for accounts made before e-mail sign-up."""

from __future__ import annotations

from typing import Any

from allauth.account.adapter import DefaultAccountAdapter
from django.contrib import messages
from django.contrib.auth.base_user import AbstractBaseUser
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.translation import gettext_lazy as _

from core import clients
from shop import identity

VERIFY_STAGE = "allauth.account.stages.EmailVerificationStage"
# Named, not imported: allauth.account.stages must not load before allauth has (an import cycle).
OUR_VERIFY_STAGE = "accounts.stages.VerifyOrAddEmailStage"
STAFF_MESSAGE = _("Staff accounts sign in at the admin's login page.")


class AccountAdapter(DefaultAccountAdapter):
    # allauth's "The username and/or password you specified are not correct." in the shop's words
    error_messages = {
        **DefaultAccountAdapter.error_messages,
        "email_password_mismatch": "That e-mail address and password are not correct.",
        "username_password_mismatch": "That username and password are not correct.",
    }

    def format_email_subject(self, subject: str) -> str:
        """The shop's name in front, as on every other e-mail (not ACCOUNT_EMAIL_SUBJECT_PREFIX)."""
        return identity.subject(str(subject))

    def get_from_email(self) -> str:
        return identity.sender()

    def get_client_ip(self, request: HttpRequest) -> str:
        """Sign-up and login limits count per address as the waiting room's do (core.clients)."""
        return clients.client_ip(request)

    def pre_login(self, request: HttpRequest, user: AbstractBaseUser, **kwargs: Any) -> HttpResponse | None:
        """Staff sign in at the admin's login, never the shop's: that one has the address lockout
        and no e-mail verification stage a staff account without an address could skip."""
        if getattr(user, "is_staff", False) or getattr(user, "is_superuser", False):
            from allauth.account.internal.stagekit import clear_login

            clear_login(request)
            messages.error(request, STAFF_MESSAGE)
            return redirect(f"{reverse('admin:login')}?next={reverse('admin:index')}")
        return super().pre_login(request, user, **kwargs)

    def get_login_stages(self) -> list[str]:
        stages: list[str] = super().get_login_stages()
        return [OUR_VERIFY_STAGE if s == VERIFY_STAGE else s for s in stages]
