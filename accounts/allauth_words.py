# ruff: noqa: E501 -- each string is allauth's msgid to the character; wrapping would change it
"""allauth's own words that reach a buyer, named here so the shop's catalogue keeps its formal German
("Sie") for them: allauth's German catalogue says "du", and the project's translations win (LOCALE_PATHS).

Nothing imports this module; makemessages reads it. A string allauth rewords is simply no longer used."""

from __future__ import annotations

from django.utils.translation import gettext_noop

ALLAUTH_WORDS = (
    gettext_noop("You cannot remove your primary email address."),
    gettext_noop("Please type your current password."),
    gettext_noop("You cannot add more than %d email addresses."),
    gettext_noop("Your primary email address must be verified."),
    gettext_noop("Be patient, you are sending too many requests."),
    gettext_noop("You must type the same password each time."),
    gettext_noop("You must type the same email each time."),
    gettext_noop(
        "An account already exists with this email address. Please sign in to that account first, then connect your %s account."
    ),
    gettext_noop("Your account has no password set up."),
    gettext_noop("Your account has no verified email address."),
    gettext_noop("Do you really want to remove the selected email address?"),
    gettext_noop(
        "You are receiving this email because you or someone else tried to signup for an\naccount using email address:\n\n%(email)s\n\nHowever, an account using that email address already exists.  In case you have\nforgotten about this, please use the password forgotten procedure to recover\nyour account:\n\n%(password_reset_url)s"
    ),
    gettext_noop("Thank you for using %(site_name)s!\n%(site_domain)s"),
    gettext_noop("Please Confirm Your Email Address"),
    gettext_noop("Your password has been changed."),
    gettext_noop(
        "You're receiving this email because you or someone else has requested a password reset for your user account.\nIt can be safely ignored if you did not request a password reset. Click the link below to reset your password."
    ),
    gettext_noop("In case you forgot, your username is %(username)s."),
    gettext_noop("Your email address is still pending verification."),
    gettext_noop(
        'This email confirmation link expired or is invalid. Please <a href="%(email_url)s">issue a new email confirmation request</a>.'
    ),
    gettext_noop("If you have not created an account yet, then please %(link)ssign up%(end_link)s first."),
    gettext_noop("Are you sure you want to sign out?"),
    gettext_noop("You cannot remove your primary email address (%(email)s)."),
    gettext_noop("You have confirmed %(email)s."),
    gettext_noop("You have signed out."),
    gettext_noop(
        "Forgotten your password? Enter your email address below, and we'll send you an email allowing you to reset it."
    ),
    gettext_noop(
        "We have sent you an email. If you have not received it please check your spam folder. Otherwise contact us if you do not receive it in a few minutes."
    ),
    gettext_noop(
        'The password reset link was invalid, possibly because it has already been used.  Please request a <a href="%(passwd_reset_url)s">new password reset</a>.'
    ),
    gettext_noop("Your password is now changed."),
    gettext_noop("Your phone number is still pending verification."),
    gettext_noop("Already have an account? Then please %(link)ssign in%(end_link)s."),
    gettext_noop("You are already logged in as %(user_display)s."),
    gettext_noop(
        "You currently do not have any email address set up. You should really add an email address so you can receive notifications, reset your password, etc."
    ),
    gettext_noop("Verify Your Email Address"),
    gettext_noop(
        "We have sent an email to you for verification. Follow the link provided to finalize the signup process. If you do not see the verification email in your main inbox, check your spam folder. Please contact us if you do not receive the verification email within a few minutes."
    ),
    gettext_noop(
        "This part of the site requires us to verify that\nyou are who you claim to be. For this purpose, we require that you\nverify ownership of your email address. "
    ),
    gettext_noop(
        "We have sent an email to you for\nverification. Please click on the link inside that email. If you do not see the verification email in your main inbox, check your spam folder. Otherwise\ncontact us if you do not receive it within a few minutes."
    ),
    gettext_noop(
        '<strong>Note:</strong> you can still <a href="%(email_url)s">change your email address</a>.'
    ),
    gettext_noop(
        'You decided to cancel logging in to our site using one of your existing accounts. If this was a mistake, please proceed to <a href="%(login_url)s">sign in</a>.'
    ),
)
