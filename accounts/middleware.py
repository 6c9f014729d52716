"""Each signed-in buyer's language, remembered for their e-mails (shop.languages)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponse

from shop import languages

# The session's note of the language last recorded for its buyer: "<buyer id>:<code>".
NOTED = "floodgate_language"


class RememberLanguage:
    """After LocaleMiddleware and the session's login: the buyer's language is written when it
    differs from the one this session last recorded, so a request costs no statement of its own
    unless the buyer changed language, signed in, or switched with the footer's switcher (the
    language cookie set_language answers with is recorded at once). A bearer token's request
    has no session login and records nothing: its buyer's pages do."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        buyer = request.session.get(SESSION_KEY)  # after the view: a login or logout has happened
        if buyer is None or str(getattr(request.user, "pk", None)) != str(buyer):
            return response  # no session login, or its account is gone (the user is anonymous)
        language = getattr(request, "LANGUAGE_CODE", None)  # LocaleMiddleware's choice
        chosen = response.cookies.get(settings.LANGUAGE_COOKIE_NAME)
        if chosen is not None and chosen.value:  # set_language's answer: the language from now on
            language = chosen.value
        if not language:
            return response
        note = f"{buyer}:{language}"
        if request.session.get(NOTED) != note:
            try:
                languages.remember(int(buyer), language)
            except (LookupError, ValueError, IntegrityError):
                return response  # a language the shop does not speak, or the account just went
            request.session[NOTED] = note
        return response
