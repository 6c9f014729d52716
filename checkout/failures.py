"""Why an order failed: stored as a code, said in the reader's language.

A failed order keeps a short code (``too_late``, ``declined:expired_card``), never a sentence, so
the page, the e-mail and the API each say it in their reader's language, and a provider's raw
decline code never reaches a buyer untranslated. Rows written before codes (English sentences) are
shown as they are.
"""

from __future__ import annotations

from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

TOO_LATE = "too_late"
AMOUNT_MISMATCH = "amount_mismatch"
ABANDONED = "abandoned"
DECLINED = "declined"
NOT_AUTHENTICATED = "not_authenticated"  # a 3-D Secure challenge failed or was abandoned

_WORDS = {
    TOO_LATE: _(
        "Your hold ended before the payment arrived, so the units were not yours any more. "
        "The payment was cancelled: you are not charged."
    ),
    AMOUNT_MISMATCH: _(
        "The payment did not match the price, so it was cancelled: you are not charged. "
        "The units went back on sale."
    ),
    ABANDONED: _("The time to pay ran out before a payment arrived; the units went back on sale."),
    NOT_AUTHENTICATED: _(
        "Your bank did not confirm this payment (3-D Secure), so nothing was charged. "
        "You may try again or use another card while your hold lasts."
    ),
}

# The decline codes Stripe documents that a buyer can act on; any other says only "declined".
_DECLINES = {
    "card_declined": _("the card was declined"),
    "generic_decline": _("the card was declined"),
    "expired_card": _("the card has expired"),
    "incorrect_cvc": _("the security code is wrong"),
    "incorrect_number": _("the card number is wrong"),
    "insufficient_funds": _("the card has insufficient funds"),
    "processing_error": _("the card could not be processed; please try again"),
    "authentication_required": _("the card's bank asked for an authentication that did not happen"),
    "payment_intent_authentication_failure": _("the card's bank could not authenticate the payment"),
    "lost_card": _("the card was declined"),
    "stolen_card": _("the card was declined"),
}


def declined(provider_code: str) -> str:
    """The code stored for a decline, keeping the provider's reason when it is one a buyer can act on."""
    detail = provider_code.strip().lower().replace(" ", "_")
    if detail == NOT_AUTHENTICATED:
        return NOT_AUTHENTICATED
    return f"{DECLINED}:{detail}" if detail in _DECLINES else DECLINED


def words(code: str) -> str:
    """What a failure code says to the reader, in the active language."""
    if code in _WORDS:
        return str(_WORDS[code])
    kind, _sep, detail = code.partition(":")
    if kind == DECLINED:
        if detail in _DECLINES:
            return gettext("The payment was declined: %(why)s.") % {"why": _DECLINES[detail]}
        return gettext("The payment was declined.")
    return code  # written before codes: an English sentence, shown as it was stored


def code(stored: str) -> str:
    """The code of a stored failure reason ("" for a sentence written before codes)."""
    if stored in _WORDS or stored.partition(":")[0] == DECLINED:
        return stored
    return ""
