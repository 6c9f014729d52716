"""Two libraries' admin actions that change data run for whoever may only view: allauth's
"mark verified" and axes' "clean up expired attempts" carry no `permissions` (and the latter
answered a 500). The same admins, each action asking for the permission its change needs (issue 43)."""

from __future__ import annotations

from allauth.account.admin import EmailAddressAdmin
from allauth.account.models import EmailAddress
from axes.admin import AccessAttemptAdmin
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _


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
