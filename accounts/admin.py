"""Accounts in the admin. Django's user pages gain erasure of a buyer's personal data on request.
Two libraries' admin actions that change data ran for whoever may only view: allauth's "mark
verified" and axes' "clean up expired attempts" carried no `permissions` (and the latter answered
a 500); the same admins, each action asking for the permission its change needs (issue 43)."""

from __future__ import annotations

from allauth.account.admin import EmailAddressAdmin
from allauth.account.models import EmailAddress
from axes.admin import AccessAttemptAdmin
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from accounts import privacy


class GuardedEmailAddressAdmin(EmailAddressAdmin):
    @admin.action(description=_("Mark selected email addresses as verified"), permissions=["change"])
    def make_verified(self, request: HttpRequest, queryset: QuerySet[EmailAddress]) -> None:
        super().make_verified(request, queryset)


class GuardedAccessAttemptAdmin(AccessAttemptAdmin):
    @admin.action(description=_("Clean up expired attempts"), permissions=["delete"])
    def cleanup_expired_attempts(self, request: HttpRequest, queryset: QuerySet[AccessAttempt]) -> None:
        # axes' own reads the time of a login attempt from the request, which an admin page is
        # not (a 500): the attempts older than the cool-off, as axes counts them.
        expired = AccessAttempt.objects.filter(attempt_time__lte=timezone.now() - settings.AXES_COOLOFF_TIME)
        count, _deleted = expired.delete()
        said = gettext("Cleaned up %(count)s expired access attempts.")
        self.message_user(request, said % {"count": count})


for model, guarded in ((EmailAddress, GuardedEmailAddressAdmin), (AccessAttempt, GuardedAccessAttemptAdmin)):
    admin.site.unregister(model)
    admin.site.register(model, guarded)


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
