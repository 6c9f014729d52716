"""Bearer tokens as a Django authentication backend, so the API plumbing needs no model of ours."""

from __future__ import annotations

from django.contrib.auth.backends import BaseBackend
from django.http import HttpRequest

from shop.models import ApiToken


class BearerTokenBackend(BaseBackend):
    def authenticate(
        self, request: HttpRequest | None, bearer_token: str | None = None, **_: object
    ) -> object:
        """The active user whose API token this is; None for anything else (other backends' turn)."""
        if not bearer_token:
            return None
        digest = ApiToken.digest_of(bearer_token)
        token = ApiToken.objects.select_related("user").filter(digest=digest).first()
        if token is None or not token.user.is_active:
            return None
        return token.user
