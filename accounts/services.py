"""A buyer's own API access: a bearer token made and revoked from their account page."""

from __future__ import annotations

from holds import lane
from shop import services as catalogue


def create_token(*, user_id: int) -> str:
    """A fresh bearer token (shown once); any earlier one stops working."""
    raw = catalogue.issue_api_token(user_id=user_id)
    lane.forget_tokens()  # the replaced token's cached answer in this process
    return raw


def revoke_token(*, user_id: int) -> bool:
    """The buyer's token stops working: at once on Django's path and in this process's claim
    lane, within holds.lane.AUTH_SECONDS in other web processes. False when there was none."""
    revoked = catalogue.revoke_api_token(user_id=user_id)
    lane.forget_tokens()
    return revoked
