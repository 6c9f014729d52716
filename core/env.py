"""Read configuration from the environment: the one place settings come from."""

from __future__ import annotations

import os
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off", ""}


def required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise ImproperlyConfigured(
            f"{name} is not set. Run the store with `python3 floodgate.py run`, "
            f"or export {name} (see README.md)."
        )
    return value


def secret(name: str, *, dev: bool, dev_value: str) -> str:
    """A secret: in dev the published dev value unless one is set; elsewhere required, and never
    that value (it is in the repository: anyone could sign admission tokens or webhooks with it)."""
    if dev:
        return os.environ.get(name) or dev_value
    value = required(name)
    if value == dev_value:
        raise ImproperlyConfigured(
            f"{name} is the published development value, which anyone can read in the repository. "
            f"Set a secret of your own (or FLOODGATE_PROFILE=dev on a laptop)."
        )
    return value


def flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean; use 1/0, true/false.")


def integer(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer.") from None


def listing(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def database(url: str) -> dict[str, object]:
    """Turn postgres://user:password@host:port/name?host=/socket/dir into Django's dict."""
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgresql:// URL, not {parts.scheme}://")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    name = unquote(parts.path.lstrip("/"))
    if not name:
        raise ImproperlyConfigured("DATABASE_URL names no database (postgresql://host/<name>).")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": query.pop("host", None) or parts.hostname or "",
        "PORT": str(parts.port or ""),
        "OPTIONS": query,
    }
