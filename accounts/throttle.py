"""The admin login throttle (django-axes), kept to the admin site.

axes counts failed logins per client address in the database (AccessAttempt rows, visible in
the admin) and refuses the address's logins to /admin/ once AXES_FAILURE_LIMIT is reached, even
with the right password, for AXES_COOLOFF_TIME. Shop logins and bearer tokens are not its
business: allauth limits the first (ACCOUNT_RATE_LIMITS), and a wrong bearer token must not cost
a database write. `manage.py axes_reset` lifts every lockout.
"""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from axes.handlers.database import AxesDatabaseHandler
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


class AdminLoginHandler(AxesDatabaseHandler):
    """axes' database handler, recording only what happens on the admin site."""

    def user_login_failed(
        self,
        sender: object,
        credentials: dict[str, object],
        request: HttpRequest | None = None,
        **kwargs: object,
    ) -> None:
        if request is not None and self.is_admin_request(request):
            super().user_login_failed(sender, credentials, request, **kwargs)

    def user_logged_in(self, sender: object, request: HttpRequest, user: object, **kwargs: object) -> None:
        if request is not None and self.is_admin_request(request):
            super().user_logged_in(sender, request, user, **kwargs)

    def user_logged_out(self, sender: object, request: HttpRequest, user: object, **kwargs: object) -> None:
        if request is not None and self.is_admin_request(request):
            super().user_logged_out(sender, request, user, **kwargs)
