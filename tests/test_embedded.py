"""The embedded servers a fresh machine runs on: real PostgreSQL and Redis, shared when already up."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
import redis

from devtools import embedded

pytestmark = pytest.mark.servers  # floodgate.py commands


def test_a_second_command_shares_the_running_servers_and_leaves_them_up(tmp_path: Path) -> None:
    first = embedded.start(tmp_path)
    try:
        second = embedded.start(tmp_path)
        assert (second.database_url, second.redis_url) == (first.database_url, first.redis_url)
        assert second.shared and not first.shared  # so the second says it used them, not started
        second.stop()

        # the first command's servers still answer
        with psycopg.connect(first.database_url) as conn:
            assert conn.execute("SHOW max_connections").fetchone() == ("300",)
        assert redis.Redis.from_url(first.redis_url).ping()
    finally:
        first.stop()
    with redis.Redis.from_url(first.redis_url, socket_connect_timeout=0.5) as client:
        try:
            client.ping()
            raise AssertionError("Redis still running after stop")
        except redis.ConnectionError:
            pass
