"""The development e-mail backend: a message is kept whole in a file and logged at INFO as a person
reads it, its subject decoded (the console backend's raw MIME came out as a WARNING, encoded)."""

from __future__ import annotations

import email
import email.policy
import logging
from pathlib import Path

import pytest
from django.core.mail import EmailMessage, get_connection
from pytest_django import Settings


def test_the_dev_backend_logs_a_readable_info_line_and_keeps_the_message(
    tmp_path: Path, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings.EMAIL_FILE_PATH = str(tmp_path)
    backend = get_connection("core.mail.DevEmailBackend", file_path=str(tmp_path))
    message = EmailMessage(
        subject="Your order 7 is confirmed: Läufer — launch edition",
        body="Hello ann,\n\nit is yours.",
        to=["ann@example.com"],
    )
    message.attach("drop.ics", "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n", "text/calendar")

    with caplog.at_level(logging.INFO, logger="core.mail"):
        assert backend.send_messages([message]) == 1

    (record,) = [r for r in caplog.records if r.name == "core.mail"]
    assert record.levelno == logging.INFO
    said = record.getMessage()
    assert said.startswith("mail to ann@example.com: Your order 7 is confirmed: Läufer — launch edition")
    assert "attached: drop.ics" in said and said.endswith("Hello ann,\n\nit is yours.")
    assert "=?utf-8?" not in said
    (kept,) = tmp_path.glob("*.log")
    parsed = email.message_from_bytes(kept.read_bytes(), policy=email.policy.default)
    assert str(parsed["Subject"]).strip() == message.subject and parsed["To"] == "ann@example.com"
