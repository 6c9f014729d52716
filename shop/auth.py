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
        token = _token(bearer_token)
        return token.user if token is not None else None


def user_of_token(raw: str) -> int | None:
    """The id of the active user whose API token this is (the claim lane caches it)."""
    token = _token(raw)
    return token.user_id if token is not None else None


def _token(raw: str) -> ApiToken | None:
    token = ApiToken.objects.select_related("user").filter(digest=ApiToken.digest_of(raw)).first()
    return token if token is not None and token.user.is_active else None
