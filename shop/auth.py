"""Bearer tokens as a Django authentication backend, so the API plumbing needs no model of ours."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import BaseBackend
from django.contrib.auth.models import User
from django.http import HttpRequest

from shop.models import ApiToken


class BearerTokenBackend(BaseBackend):
    def authenticate(self, request: HttpRequest | None, **credentials: Any) -> User | None:
        """The active user whose API token (`bearer_token=`) this is; None for anything else
        (other backends' turn)."""
        bearer_token = credentials.get("bearer_token")
        if not isinstance(bearer_token, str) or not bearer_token:
            return None
        token = _token(bearer_token)
        return token.user if token is not None else None


def users_of_tokens(raws: list[str]) -> dict[str, int]:
    """The ids of the active users whose API tokens these are, in one query (the claim lane
    resolves a crowd's new tokens together and caches them); unknown tokens are left out."""
    by_digest = {ApiToken.digest_of(raw): raw for raw in raws}
    found = ApiToken.objects.filter(digest__in=by_digest, user__is_active=True).values_list(
        "digest", "user_id"
    )
    return {by_digest[digest]: user_id for digest, user_id in found}


def _token(raw: str) -> ApiToken | None:
    token = ApiToken.objects.select_related("user").filter(digest=ApiToken.digest_of(raw)).first()
    return token if token is not None and token.user.is_active else None
