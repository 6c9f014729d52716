"""Our step in allauth's login: accounts from before e-mail sign-up."""

from __future__ import annotations

from allauth.account.models import EmailAddress
from allauth.account.stages import EmailVerificationStage
from django.contrib import messages
from django.http import HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _


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
                _(
                    "Your account has no e-mail address, so order confirmations cannot reach you. "
                    '<a href="{}">Add one</a>.'
                ),
                reverse("account_email"),
            ),
        )
        return None, True
