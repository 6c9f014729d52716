"""The login form: allauth's, with its field still posted as `username` (scripts, older pages)."""

from __future__ import annotations

from allauth.account.forms import LoginForm as AllauthLoginForm


class LoginForm(AllauthLoginForm):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.fields["login"].label = "E-mail"
        self.fields["login"].help_text = "Or the username of an account made before e-mail sign-up."
        self.fields["login"].widget.attrs.update({"autocomplete": "username", "autofocus": True})
        self.fields["login"].widget.attrs.pop("placeholder", None)
        self.fields["password"].widget.attrs.pop("placeholder", None)

    def add_prefix(self, field_name: str) -> str:
        # The login box was <input name="username"> before allauth; keep the name people post.
        return "username" if field_name == "login" else super().add_prefix(field_name)
