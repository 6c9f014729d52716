"""Accounts in the admin: Django's user pages, with erasure of a buyer's personal data on request."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from accounts import privacy

User = get_user_model()
admin.site.unregister(User)


@admin.register(User)
class AccountAdmin(UserAdmin):
    actions = ["erase_personal_data"]

    @admin.action(description=_("Erase personal data (on the buyer's request)"), permissions=["delete"])
    def erase_personal_data(self, request: HttpRequest, queryset: QuerySet) -> None:
        """GDPR art. 17: the person anonymised, the sales kept (accounts.privacy.erase)."""
        done = 0
        for user in queryset:
            if user.is_staff or user.is_superuser:
                self.message_user(
                    request,
                    gettext("%(name)s is staff, not a buyer: not erased.") % {"name": user.get_username()},
                    messages.WARNING,
                )
                continue
            privacy.erase(user_id=user.pk)
            user.refresh_from_db()  # logged under the erased name: the log keeps nobody's
            self.log_change(request, user, "Personal data erased on request.")
            done += 1
        if done:
            words = ngettext(
                "%(count)s buyer's personal data erased.", "%(count)s buyers' personal data erased.", done
            )
            self.message_user(request, words % {"count": done}, messages.SUCCESS)
