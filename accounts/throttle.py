"""The admin login throttle (django-axes): every door into an account that can open the admin.

axes counts failed logins in the database (AccessAttempt rows, visible in the admin) per client
address (core.clients) and per account, and once either reaches AXES_FAILURE_LIMIT refuses that
address's, or that account's, logins for AXES_COOLOFF_TIME, even with the right password: on the
admin site, and for a staff account wherever it is tried (the shop's login too, which would
otherwise walk around the lockout). The account is named case-insensitively and by username or
e-mail alike (account_key), as the backends find it: "OPS" is "ops" is "ops@example.com". A
locked attempt is refused by AdminLoginBackend, first of the backends, before any password is
hashed. A buyer's shop login and bearer tokens are not its business: allauth limits the first
(ACCOUNT_RATE_LIMITS), and a wrong bearer token must not cost a database write.
`manage.py axes_reset` lifts every lockout.
"""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Q
from django.http import HttpRequest

LOGIN_FIELDS = ("username", "email", "login")  # what the admin's and allauth's forms pass


class AdminLoginBackend(AxesStandaloneBackend):
    """axes' gate in front of the password backends; authenticate() without a request (a script,
    a management command) is no login through a page, so it is not its business."""

    def authenticate(self, request: HttpRequest | None, *args: object, **kwargs: object) -> None:
        if request is None:
            return None
        return super().authenticate(request, *args, **kwargs)


def given_login(request: HttpRequest | None, credentials: dict[str, object] | None) -> str:
    """The name a login attempt gives (username or e-mail), stripped; "" for none."""
    source = credentials if credentials else getattr(request, "POST", None) or {}
    for field in LOGIN_FIELDS:
        value = source.get(field)
        if value:
            return str(value).strip()
    return ""


def _account(request: HttpRequest | None, given: str) -> AbstractBaseUser | None:
    """The account a login name finds, case-insensitively by username, else by e-mail; looked up
    once per request (axes asks several times)."""
    if not given:
        return None
    found: dict[str, AbstractBaseUser | None] = getattr(request, "_floodgate_accounts", {})
    if given not in found:
        users = get_user_model().objects.filter(Q(username__iexact=given) | Q(email__iexact=given))
        ranked = sorted(users[:5], key=lambda u: (u.get_username().lower() != given.lower(), u.pk))
        found[given] = ranked[0] if ranked else None
        if request is not None:
            request._floodgate_accounts = found  # type: ignore[attr-defined]
    return found[given]


def account_key(request: HttpRequest | None, credentials: dict[str, object] | None) -> str | None:
    """What axes counts an attempt's account by (AXES_USERNAME_CALLABLE): the account's username
    in lower case whichever spelling or e-mail found it; a name that finds none, lower-cased."""
    given = given_login(request, credentials)
    if not given:
        return None
    user = _account(request, given)
    return (user.get_username() if user is not None else given).lower()


def names_staff(request: HttpRequest | None, credentials: dict[str, object] | None) -> bool:
    """Whether a login's username or e-mail, in any case, finds an account that can open the admin."""
    user = _account(request, given_login(None, credentials) if credentials else "")
    return bool(
        user is not None and (getattr(user, "is_staff", False) or getattr(user, "is_superuser", False))
    )


class AdminLoginHandler(AxesDatabaseHandler):
    """axes' database handler for the admin site's logins and a staff account's anywhere."""

    def guards(self, request: HttpRequest | None, credentials: dict[str, object] | None) -> bool:
        return request is not None and (self.is_admin_request(request) or names_staff(request, credentials))

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

    def reset_user_attempts(self, request: HttpRequest, credentials: dict[str, object] | None = None) -> int:
        """A right password forgets its own account's failures from its own address, nothing more:
        not the address's failures against other accounts (a colleague's password guessed between
        one's own logins would never lock), nor other addresses' failures against this account."""
        username = get_client_username(request, credentials)
        mine = AccessAttempt.objects.filter(username=username, ip_address=request.axes_ip_address)  # type: ignore[attr-defined]
        count, _deleted = mine.delete()
        return count
