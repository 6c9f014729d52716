from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = _("Buyer accounts")

    def ready(self) -> None:
        from django.contrib.auth import get_user_model, user_logged_out
        from django.db.models.signals import post_delete, post_save, pre_save

        from accounts import services
        from shop.models import ApiToken

        user = get_user_model()
        # a ban (Active unticked) or a deleted account reaches every web process's caches at once
        pre_save.connect(services.on_user_saving, sender=user, dispatch_uid="accounts-note-deactivating")
        post_save.connect(services.on_user_saved, sender=user, dispatch_uid="accounts-revoke-deactivated")
        post_delete.connect(services.on_user_deleted, sender=user, dispatch_uid="accounts-revoke-deleted")
        # a logout: the old session's queue tickets stop being answered at the edge
        user_logged_out.connect(services.on_logged_out, dispatch_uid="accounts-revoke-logged-out")
        # a token deleted in the admin, as a revoked one
        post_delete.connect(services.on_token_deleted, sender=ApiToken, dispatch_uid="accounts-revoke-token")
