"""The admin login throttle (django-axes): every door into an account that can open the admin.

axes counts failed logins per client address in the database (AccessAttempt rows, visible in
the admin) and refuses the address's logins once AXES_FAILURE_LIMIT is reached, even with the
right password, for AXES_COOLOFF_TIME: on the admin site, and for a staff account wherever it
is tried (the shop's login too, which would otherwise walk around the lockout). A buyer's shop
login and bearer tokens are not its business: allauth limits the first (ACCOUNT_RATE_LIMITS),
and a wrong bearer token must not cost a database write. `manage.py axes_reset` lifts every lockout.
"""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from axes.handlers.database import AxesDatabaseHandler
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import HttpRequest

from admission import limits


def client_ip(request: HttpRequest) -> str:
    """The address axes counts by: the one the rate limits use (the proxy's last hop if trusted)."""
    return limits.client_ip(request)


class AdminLoginBackend(AxesStandaloneBackend):
    """axes' gate in front of the password backends; authenticate() without a request (a script,
    a management command) is no login through a page, so it is not its business."""

    def authenticate(self, request: HttpRequest | None, *args: object, **kwargs: object) -> None:
        if request is None:
            return None
        return super().authenticate(request, *args, **kwargs)


def names_staff(credentials: dict[str, object] | None) -> bool:
    """Whether a login's username or e-mail is a staff account's (one that can open the admin)."""
    given = [str(v) for k, v in (credentials or {}).items() if k in ("username", "email", "login") and v]
    if not given:
        return False
    named = Q(username__in=given) | Q(email__in=[g.lower() for g in given])
    return get_user_model().objects.filter(named, Q(is_staff=True) | Q(is_superuser=True)).exists()


class AdminLoginHandler(AxesDatabaseHandler):
    """axes' database handler for the admin site's logins and a staff account's anywhere."""

    def guards(self, request: HttpRequest | None, credentials: dict[str, object] | None) -> bool:
        return request is not None and (self.is_admin_request(request) or names_staff(credentials))

    def is_allowed(self, request: HttpRequest, credentials: dict[str, object] | None = None) -> bool:
        return not self.guards(request, credentials) or super().is_allowed(request, credentials)

    def user_login_failed(
        self,
        sender: object,
        credentials: dict[str, object],
        request: HttpRequest | None = None,
        **kwargs: object,
    ) -> None:
        if self.guards(request, credentials):
            super().user_login_failed(sender, credentials, request, **kwargs)

    # A staff account never logs in outside the admin (the shop's login refuses it before
    # login()), so successes and logouts are the admin site's only.
    def user_logged_in(self, sender: object, request: HttpRequest, user: object, **kwargs: object) -> None:
        if request is not None and self.is_admin_request(request):
            super().user_logged_in(sender, request, user, **kwargs)

    def user_logged_out(self, sender: object, request: HttpRequest, user: object, **kwargs: object) -> None:
        if request is not None and self.is_admin_request(request):
            super().user_logged_out(sender, request, user, **kwargs)
