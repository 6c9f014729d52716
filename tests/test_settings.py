"""Production settings are safe by default; the deploy checklist is clean."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parent.parent


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"FLOODGATE_PROFILE", "DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env={**base, **env}, text=True, capture_output=True
    )


def test_production_profile_passes_check_deploy(tmp_path: Path) -> None:
    from tests.ops.test_deploy_checks import write_manifest  # collected static files (ops/checks.py)

    done = manage(
        {**PRODUCTION, "STATIC_ROOT": str(write_manifest(tmp_path / "static"))},
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
    )

    assert done.returncode == 0, done.stdout + done.stderr


def test_production_refuses_to_start_without_a_secret_key() -> None:
    done = manage({}, "check")

    assert done.returncode != 0
    assert "SECRET_KEY is not set" in done.stderr


def test_missing_database_url_names_the_variable() -> None:
    done = manage({"FLOODGATE_PROFILE": "dev", "DATABASE_URL": ""}, "check")

    assert done.returncode != 0
    assert "DATABASE_URL is not set" in done.stderr


def test_dockerfile_collects_static_files_for_the_production_storage() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    collect = next(line for line in dockerfile.splitlines() if "collectstatic" in line)
    assert "FLOODGATE_PROFILE=dev" not in dockerfile and "collectstatic" in collect
    assert ".data" in (ROOT / ".dockerignore").read_text().split()


PRODUCTION = {
    "SECRET_KEY": "x" * 32 + "-production-secret-of-enough-length-and-variety-9f3",
    "ALLOWED_HOSTS": "shop.example",
    "PAYMENT_PROVIDER_SECRET": "provider-api-key",
    "PAYMENT_WEBHOOK_SECRET": "provider-webhook-secret",
    "PAYMENT_PROVIDER_URL": "https://pay.example",
    "PUBLIC_BASE_URL": "https://shop.example",
}


@pytest.mark.parametrize(
    ("name", "published"),
    [
        ("SECRET_KEY", "dev-only-insecure-key-never-in-production"),  # signs admission tokens
        ("PAYMENT_PROVIDER_SECRET", "sim-secret-dev"),
        ("PAYMENT_WEBHOOK_SECRET", "sim-webhook-secret-dev"),  # a forged webhook would verify
    ],
)
def test_production_refuses_to_start_with_a_published_dev_secret(name: str, published: str) -> None:
    done = manage({**PRODUCTION, name: published}, "check")

    assert done.returncode != 0
    assert f"{name} is the published development value" in done.stderr


def settings_values(env: dict[str, str], *names: str) -> list[str]:
    """Each setting's repr, as one process started with `env` has it (one Django start for all)."""
    code = "from django.conf import settings; " + "; ".join(f"print(repr(settings.{n}))" for n in names)
    done = manage(env, "shell", "-c", code)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-len(names) :]  # after what shell says it imported


def settings_value(env: dict[str, str], name: str) -> str:
    return settings_values(env, name)[0]


def test_x_forwarded_proto_is_believed_only_behind_a_trusted_proxy() -> None:
    assert settings_value(PRODUCTION, "SECURE_PROXY_SSL_HEADER") == "None"
    behind = settings_value({**PRODUCTION, "TRUST_X_FORWARDED_FOR": "1"}, "SECURE_PROXY_SSL_HEADER")
    assert behind == "('HTTP_X_FORWARDED_PROTO', 'https')"


def test_database_url_takes_one_host_a_socket_folder_or_several_hosts() -> None:
    from core import env

    one = env.database("postgresql://app:s%40cret@db:6432/shop")
    socket = env.database("postgresql://postgres:@/shop?host=/run/pg")
    several = env.database(
        "postgresql://app:pw@primary:5432,standby:5433,[::1]:5434/shop?target_session_attrs=read-write"
    )

    assert (one["HOST"], one["PORT"], one["USER"], one["PASSWORD"]) == ("db", "6432", "app", "s@cret")
    assert (socket["HOST"], socket["PORT"], socket["OPTIONS"]) == ("/run/pg", "", {})
    assert (several["HOST"], several["PORT"]) == ("primary,standby,::1", "5432,5433,5434")
    assert several["OPTIONS"] == {"target_session_attrs": "read-write"}


@pytest.mark.django_db
def test_a_multi_host_url_reaches_the_server_past_a_dead_host() -> None:
    from django.db import connection
    from django.db.backends.postgresql.base import DatabaseWrapper

    from core import env

    # given the test server listed second, after a port nobody listens on
    real = connection.settings_dict
    dead = free_port()
    where = real["HOST"] if real["HOST"].startswith("/") else f"127.0.0.1:{real['PORT'] or 5432}"
    if where.startswith("/"):
        url = f"postgresql://{real['USER']}@127.0.0.1:{dead},:{real['PORT'] or 5432}/{real['NAME']}"
        url += "?target_session_attrs=read-write"
        settings_dict = env.database(url)
        settings_dict["HOST"] = f"127.0.0.1,{where}"
    else:
        url = f"postgresql://{real['USER']}@127.0.0.1:{dead},{where}/{real['NAME']}?target_session_attrs=read-write"
        settings_dict = env.database(url)
    wrapper = DatabaseWrapper({**real, **settings_dict, "OPTIONS": settings_dict["OPTIONS"]}, alias="probe")

    # when Django's own parameters open a connection
    params = wrapper.get_connection_params()
    with psycopg.connect(**{k: v for k, v in params.items() if k != "context"}, autocommit=True) as conn:
        # then libpq skipped the dead host and found a read-write server
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
        assert conn.info.port == int(real["PORT"] or 5432)


def test_pgbouncer_mode_turns_off_prepared_statements_and_server_side_cursors() -> None:
    show = (
        "from django.conf import settings as s; d = s.DATABASES['default'];"
        "print(d['OPTIONS'].get('prepare_threshold', 'unset'), d.get('DISABLE_SERVER_SIDE_CURSORS', False))"
    )
    dev = {"FLOODGATE_PROFILE": "dev"}

    pooled = manage({**dev, "DB_POOLER": "pgbouncer"}, "shell", "-c", show)
    direct = manage({**dev, "DB_POOLER": ""}, "shell", "-c", show)
    wrong = manage({**dev, "DB_POOLER": "pgpool"}, "check")

    assert pooled.stdout.splitlines()[-1:] == ["None True"], pooled.stderr
    assert direct.stdout.splitlines()[-1:] == ["unset False"], direct.stderr
    assert wrong.returncode != 0 and "DB_POOLER='pgpool'" in wrong.stderr


def test_redis_sentinels_point_every_client_at_the_named_master() -> None:
    sentinels = {
        "REDIS_SENTINELS": "10.0.0.1:26379,[::1]:26380",
        "REDIS_SENTINEL_MASTER": "shop",
        "REDIS_URL": "redis://x/3",
    }
    env = {**PRODUCTION, **sentinels}
    broker, options, location, factory, layer = settings_values(
        env,
        "CELERY_BROKER_URL",
        "CELERY_BROKER_TRANSPORT_OPTIONS",
        "CACHES['default']['LOCATION']",
        "DJANGO_REDIS_CONNECTION_FACTORY",
        "CHANNEL_LAYERS['default']['CONFIG']['hosts'][0]",
    )

    assert broker == "'sentinel://10.0.0.1:26379/3;sentinel://[::1]:26380/3'"
    assert "'master_name': 'shop'" in options
    assert location == "'redis://shop/3'"
    assert factory == "'django_redis.pool.SentinelConnectionFactory'"
    assert "'master_name': 'shop'" in layer and "('10.0.0.1', 26379)" in layer and "'db': 3" in layer
    assert settings_value(PRODUCTION, "CELERY_BROKER_URL") == repr(
        os.environ["REDIS_URL"]
    )  # unset: as before


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ({"REDIS_SENTINEL_MASTER": "Shop"}, "REDIS_SENTINEL_MASTER='Shop': use lower-case"),
        ({"REDIS_URL": "redis://:secret@x/0"}, "with a password, a user or rediss://"),
    ],
)
def test_sentinels_refuse_what_would_be_lost_on_the_way_to_the_master(extra: dict, said: str) -> None:
    done = manage({**PRODUCTION, "REDIS_SENTINELS": "127.0.0.1:26379", **extra}, "check")

    assert done.returncode != 0 and said in done.stderr, done.stderr[-500:]


@pytest.mark.parametrize("garbage", ["nohost", "host:port", ":26379", "a:1,b"])
def test_garbage_in_redis_sentinels_is_refused_with_its_name(garbage: str) -> None:
    done = manage({**PRODUCTION, "REDIS_SENTINELS": garbage}, "check")

    assert done.returncode != 0
    assert f"REDIS_SENTINELS: {garbage.split(',')[-1]!r} is not host:port" in done.stderr, done.stderr[-500:]


def test_only_the_dev_profile_hashes_passwords_the_fast_way() -> None:
    show = "from django.conf import settings; print(settings.PASSWORD_HASHERS[0])"
    fast = manage({"FAST_PASSWORD_HASHING": "1", "FLOODGATE_PROFILE": "dev"}, "shell", "-c", show)
    real = manage({**PRODUCTION, "FAST_PASSWORD_HASHING": "1"}, "shell", "-c", show)

    assert fast.stdout.splitlines()[-1] == "django.contrib.auth.hashers.MD5PasswordHasher", fast.stderr
    assert real.stdout.splitlines()[-1] == "django.contrib.auth.hashers.PBKDF2PasswordHasher", real.stderr


def test_production_allows_no_rehearsal_until_a_crowd_size_is_set() -> None:
    assert settings_value(PRODUCTION, "REHEARSAL_MAX_BUYERS") == "0"
    assert settings_value({**PRODUCTION, "REHEARSAL_MAX_BUYERS": "2000"}, "REHEARSAL_MAX_BUYERS") == "2000"
    assert settings_value({"FLOODGATE_PROFILE": "dev"}, "REHEARSAL_MAX_BUYERS") == "20000"
