"""A buyer's own API access: a bearer token made and revoked from their account page; and what
every web process must hear when an account's credentials stop being good."""

from __future__ import annotations

from django.db import transaction

from admission import state
from catalogue import services as catalogue
from sale import lane


def create_token(*, user_id: int) -> str:
    """A fresh bearer token (shown once); any earlier one stops working (on_token_deleted)."""
    return catalogue.issue_api_token(user_id=user_id)


def revoke_token(*, user_id: int) -> bool:
    """The buyer's token stops working, in every web process at once (on_token_deleted). False when
    there was none."""
    return catalogue.revoke_api_token(user_id=user_id)


def credentials_revoked(*, user_id: int) -> None:
    """Once the change is committed: this process's claim lane forgets what it looked up, and every
    other process hears it through Redis (their lanes forget, their edges send the buyer's older
    queue tickets to Django, which checks the credential)."""

    def tell() -> None:
        lane.forget_buyer(user_id)  # this process at once, whatever Redis does
        state.revoke(user_id)

    transaction.on_commit(tell)


def on_user_saving(sender: type, instance: object, **kwargs: object) -> None:
    """pre_save of the user model: note an account about to be deactivated (on-call's ban)."""
    pk = getattr(instance, "pk", None)
    deactivating = pk is not None and not getattr(instance, "is_active", True)
    if deactivating:
        deactivating = sender._default_manager.filter(pk=pk, is_active=True).exists()  # type: ignore[attr-defined]
    instance._floodgate_deactivating = deactivating  # type: ignore[attr-defined]


def on_user_saved(sender: type, instance: object, **kwargs: object) -> None:
    """post_save: the deactivation is written, so the announcement cannot come before it."""
    if getattr(instance, "_floodgate_deactivating", False):
        instance._floodgate_deactivating = False  # type: ignore[attr-defined]
        credentials_revoked(user_id=instance.pk)  # type: ignore[attr-defined]


def on_user_deleted(sender: type, instance: object, **kwargs: object) -> None:
    pk = getattr(instance, "pk", None)
    if pk is not None:
        credentials_revoked(user_id=pk)


def on_logged_out(sender: type, request: object, user: object, **kwargs: object) -> None:
    """user_logged_out: the session is gone, but a queue ticket bound to it still named it at the edge,
    which checks no session; revoked like a token, so the old cookie and ticket mint no admission."""
    pk = getattr(user, "pk", None)
    if pk is not None:
        credentials_revoked(user_id=pk)


def on_token_deleted(sender: type, instance: object, **kwargs: object) -> None:
    """post_delete of a token: replaced, revoked, or deleted in the admin."""
    user_id = getattr(instance, "user_id", None)
    if user_id is not None:
        credentials_revoked(user_id=user_id)
