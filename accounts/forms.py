"""allauth's forms with the shop's words; the login box is still posted as `username`."""

from __future__ import annotations

from allauth.account.forms import LoginForm as AllauthLoginForm
from allauth.account.forms import ResetPasswordForm as AllauthResetPasswordForm
from allauth.account.forms import SignupForm as AllauthSignupForm
from django import forms
from django.utils.translation import gettext_lazy as _

EMAIL = _("E-mail")


def _plain(form: forms.Form) -> None:
    """Labels over the boxes, not placeholders inside them (they vanish as one types)."""
    for field in form.fields.values():
        field.widget.attrs.pop("placeholder", None)


class LoginForm(AllauthLoginForm):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        _plain(self)
        # Accounts made before e-mail sign-up log in with their username: the label says both.
        self.fields["login"].label = _("E-mail or username")
        self.fields["login"].help_text = ""
        self.fields["login"].widget.attrs.update({"autocomplete": "username", "autofocus": True})
        self.fields["password"].help_text = ""  # the page links "Forgot your password?" itself
        if "remember" in self.fields:
            self.fields["remember"].label = _("Keep me logged in")
            self.fields["remember"].label_suffix = ""  # a box beside its words, not a question

    def add_prefix(self, field_name: str) -> str:
        # The login box was <input name="username"> before allauth; keep the name people post.
        return "username" if field_name == "login" else super().add_prefix(field_name)


class SignupForm(AllauthSignupForm):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        _plain(self)
        self.fields["email"].label = EMAIL


class ResetPasswordForm(AllauthResetPasswordForm):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        _plain(self)
        self.fields["email"].label = EMAIL
