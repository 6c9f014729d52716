"""A drop's start as an iCalendar event (RFC 5545): the reminder e-mail attaches it, the drop page
links it. A calendar that imports it twice keeps one event: its UID is the drop's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils.translation import gettext

from shop import identity
from shop.models import Drop

# The event is the moment the sale opens, not the sale's whole window (often days long, which a
# calendar would draw over every one of them); the alarm rings shortly before.
EVENT_LENGTH = timedelta(minutes=30)
ALARM_BEFORE = timedelta(minutes=10)
LINE_OCTETS = 75  # RFC 5545 §3.1: longer content lines are folded


def drop_event(drop: Drop, *, stamped_at: datetime) -> str:
    """The VCALENDAR text of one event at the drop's start, with a link to its page."""
    url = settings.PUBLIC_BASE_URL.rstrip("/") + drop.get_absolute_url()
    title = drop.display_title
    shop = identity.current().name
    # In the active language: the reminder's relay writes under the buyer's, the drop page the reader's.
    said = gettext("The sale of %(title)s at %(shop)s opens now. Buy it here: %(url)s") % {
        "title": title,
        "shop": shop,
        "url": url,
    }
    summary = gettext("%(title)s goes on sale") % {"title": title}
    soon = gettext("%(title)s goes on sale soon") % {"title": title}
    lines = [
        "BEGIN:VCALENDAR",
        "VERSION:2.0",
        f"PRODID:-//{_text(shop)}//drop reminders//EN",
        "CALSCALE:GREGORIAN",
        "METHOD:PUBLISH",
        "BEGIN:VEVENT",
        f"UID:drop-{drop.pk}@floodgate",  # kept: a calendar that imported it before keeps one event
        f"DTSTAMP:{_utc(stamped_at)}",
        f"DTSTART:{_utc(drop.starts_at)}",
        f"DTEND:{_utc(min(drop.starts_at + EVENT_LENGTH, drop.ends_at))}",
        f"SUMMARY:{_text(summary)}",
        f"DESCRIPTION:{_text(said)}",
        f"URL:{url}",
        "BEGIN:VALARM",
        "ACTION:DISPLAY",
        f"DESCRIPTION:{_text(soon)}",
        f"TRIGGER:-PT{int(ALARM_BEFORE.total_seconds() // 60)}M",
        "END:VALARM",
        "END:VEVENT",
        "END:VCALENDAR",
    ]
    return "".join(_fold(line) + "\r\n" for line in lines)


def file_name(drop: Drop) -> str:
    return f"{drop.slug}.ics"


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _text(value: str) -> str:
    """A TEXT value: backslash, semicolon, comma and line breaks escaped (§3.3.11)."""
    value = value.replace("\\", "\\\\").replace(";", "\\;").replace(",", "\\,")
    return value.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")


def _fold(line: str) -> str:
    """Lines of at most 75 octets, continued after CRLF and a space; never inside a UTF-8 character."""
    parts: list[str] = []
    current, size, limit = "", 0, LINE_OCTETS
    for char in line:
        width = len(char.encode())
        if size + width > limit:
            parts.append(current)
            current, size, limit = "", 0, LINE_OCTETS - 1  # the leading space counts
        current += char
        size += width
    parts.append(current)
    return "\r\n ".join(parts)
