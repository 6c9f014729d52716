"""Django for bench.claims, in the bench itself and in every client process."""

from __future__ import annotations

import os


def setup_django() -> None:
    """Configure Django in this process, with one plain connection and no pool.

    Each process opens its connection for a run and closes it after (bench.claims' clients):
    64 client processes, or pgbench's 64 clients, fit in a stock max_connections = 100,
    where 64 pools of config.settings' size (min 8) did not.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # Query logging of DEBUG would tax the Python side only; production runs with it off.
    os.environ.setdefault("DEBUG", "0")
    import django
    from django.conf import settings

    django.setup()
    # Read at the first connect, so dropping it here (before any query) means no pool.
    settings.DATABASES["default"]["OPTIONS"].pop("pool", None)
