"""The development shop's e-mail: each message kept whole in a file under EMAIL_FILE_PATH and logged
at INFO as a person reads it (Django's console backend printed the raw MIME to stdout, which Celery's
worker logs as a WARNING, with the subject still encoded: "=?utf-8?q?...")."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from django.conf import settings
from django.core.mail import EmailMessage
from django.core.mail.backends.filebased import EmailBackend

log = logging.getLogger(__name__)


class DevEmailBackend(EmailBackend):
    def send_messages(self, email_messages: Sequence[EmailMessage]) -> int:
        sent = super().send_messages(email_messages)
        for message in email_messages:
            attached = [str(a[0] if isinstance(a, tuple) else a.get_filename()) for a in message.attachments]
            log.info(
                "mail to %s: %s (kept in %s)%s\n%s",
                ", ".join(message.to),
                message.subject,
                settings.EMAIL_FILE_PATH,
                f", attached: {', '.join(attached)}" if attached else "",
                message.body,
            )
        return sent
