"""Read configuration from the environment: the one place settings come from."""

from __future__ import annotations

import os
from typing import Any
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


# Django's own `check --deploy` heuristic (security.W009): a key shorter than this, or of fewer
# different characters, was typed by hand ("x", "changeme") and can be guessed.
SECRET_KEY_MIN_LENGTH = 50
SECRET_KEY_MIN_DISTINCT = 5

# Web Push's VAPID key of dev and the tests (config/settings.py): published here, so a deploy check
# (ops/checks.py) refuses it outside dev.
DEV_VAPID_KEY = "fgB0Wb2lYdwqO50R_F8eAZ6SPFRHJXy3B6RQZf6Kzik"


def secret_key(name: str, *, dev: bool, dev_value: str) -> str:
    """The key that signs sessions, admission tokens and queue tickets: a secret (above) that,
    outside dev, is long and varied enough not to be guessed."""
    value = secret(name, dev=dev, dev_value=dev_value)
    distinct = len(set(value))
    if not dev and (len(value) < SECRET_KEY_MIN_LENGTH or distinct < SECRET_KEY_MIN_DISTINCT):
        raise ImproperlyConfigured(
            f"{name} is too weak for production ({len(value)} characters, {distinct} different; "
            f"at least {SECRET_KEY_MIN_LENGTH} and {SECRET_KEY_MIN_DISTINCT}): anyone who guesses it "
            f"signs sessions and admission tokens. Make one with "
            f"`python3 -c 'import secrets; print(secrets.token_urlsafe(50))'`."
        )
    return value


def payment_provider(name: str, *, dev: bool, rehearsal_flag: str) -> str:
    """The payment adapter's name. Outside dev the simulator (the default) is refused unless the
    deployment says it is a rehearsal: its page confirms any order a visitor presses "pay" on,
    and no money moves."""
    value = os.environ.get(name) or "simulated"
    if value == "simulated" and not dev and not flag(rehearsal_flag, default=False):
        said = f"{name}=simulated" if os.environ.get(name) else f"{name} is unset (so: simulated)"
        raise ImproperlyConfigured(
            f"{said}: the simulated payment provider takes no money, anyone pressing 'pay' on its "
            f"page gets a confirmed order. In production set "
            f"{name}=stripe and its STRIPE_* keys (README, 'Taking real money'). A rehearsal "
            f"environment that real buyers cannot reach may run on it with {rehearsal_flag}=1 "
            f"(docker-compose.rehearsal.yml sets it)."
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


def addresses(name: str) -> list[tuple[str, int]]:
    """`host:port,host:port` (REDIS_SENTINELS) as (host, port) pairs; unset: none."""
    found = []
    for entry in listing(name, []):
        try:
            host, port = _host_and_port(entry)
        except ImproperlyConfigured:
            host, port = "", ""
        if not host or not port:
            raise ImproperlyConfigured(f"{name}: {entry!r} is not host:port (e.g. 10.0.0.5:26379).")
        found.append((host, int(port)))
    return found


def sentinel_master(name: str, *, redis_url: str, used: bool) -> str:
    """The master's name the sentinels watch. Lower case (django-redis reads it as a URL's host,
    which is lowered); with sentinels, REDIS_URL may carry no credentials or TLS yet (they would be
    dropped on the way to the master: refused rather than a NOAUTH at the first request)."""
    value = os.environ.get(name) or "floodgate"
    if not used:
        return value
    if value != value.lower() or not value.replace("-", "").replace("_", "").isalnum():
        raise ImproperlyConfigured(f"{name}={value!r}: use lower-case letters, digits, - and _.")
    parts = urlsplit(redis_url)
    if parts.username or parts.password or parts.scheme != "redis":
        raise ImproperlyConfigured(
            "REDIS_SENTINELS with a password, a user or rediss:// in REDIS_URL is not supported: "
            "REDIS_URL then names only the database (redis://sentinel/0)."
        )
    return value


def redis_db(url: str) -> int:
    """The database number of a redis:// URL (redis://host:6379/3 -> 3; none -> 0)."""
    path = urlsplit(url).path.strip("/")
    if not path.isdigit() and path:
        raise ImproperlyConfigured(f"REDIS_URL: {path!r} is not a database number.")
    return int(path or 0)


def database(url: str) -> dict[str, Any]:
    """Turn postgres://user:password@host:port/name?host=/socket/dir into Django's dict.

    Several hosts (`@primary:5432,standby:5432/name?target_session_attrs=read-write`) pass
    through to libpq as its host and port lists, so a connection finds whichever is primary.
    """
    parts = urlsplit(url)
    if parts.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgresql:// URL, not {parts.scheme}://")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    name = unquote(parts.path.lstrip("/"))
    if not name:
        raise ImproperlyConfigured("DATABASE_URL names no database (postgresql://host/<name>).")
    credentials, _, hostlist = parts.netloc.rpartition("@")
    user, _, password = credentials.partition(":")
    hosts, ports = [], []
    for entry in hostlist.split(","):
        host, port = _host_and_port(entry)
        hosts.append(host)
        ports.append(port)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": unquote(user),
        "PASSWORD": unquote(password),
        "HOST": query.pop("host", None) or ",".join(hosts),
        "PORT": ",".join(ports) if any(ports) else "",
        "OPTIONS": query,
    }


def _host_and_port(entry: str) -> tuple[str, str]:
    """'[::1]:5432' -> ('::1', '5432'); 'db' -> ('db', '')."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, rest.removeprefix(":")
    host, _, port = entry.partition(":")
    if port and not port.isdigit():
        raise ImproperlyConfigured(f"{port!r} is not a port (in {entry!r}).")
    return unquote(host), port


def origin(url: str) -> str:
    """scheme://host[:port] of a URL: where a provider's pages live, without its path."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def pooler(name: str) -> str | None:
    """What stands between the app and PostgreSQL: None (direct) or 'pgbouncer' (transaction mode)."""
    value = os.environ.get(name, "").strip().lower()
    if value in {"", "none", "direct"}:
        return None
    if value == "pgbouncer":
        return value
    raise ImproperlyConfigured(f"{name}={value!r}: use 'pgbouncer' or leave it unset.")
