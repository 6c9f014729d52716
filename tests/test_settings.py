"""Production settings are safe by default; the deploy checklist is clean."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from devtools.ports import free_port

pytestmark = pytest.mark.servers  # each case starts a process with its own settings

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
    # these tests are about other settings: they run on the simulator, as a rehearsal may
    "ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL": "1",
}
# What a deployer who set only what is required gets (the payment provider left at its default).
DEFAULTS = {k: v for k, v in PRODUCTION.items() if k != "ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL"}
STRIPE = {
    "PAYMENT_PROVIDER": "stripe",
    "STRIPE_SECRET_KEY": "sk_live_settings_test",
    "STRIPE_PUBLISHABLE_KEY": "pk_live_settings_test",
    "STRIPE_WEBHOOK_SECRET": "whsec_settings_test",
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


# Issue 43: a production deployment ran on play money by default (PAYMENT_PROVIDER=simulated).


def test_production_with_the_default_provider_refuses_to_start() -> None:
    done = manage(DEFAULTS, "check")

    assert done.returncode != 0
    assert "PAYMENT_PROVIDER is unset (so: simulated): the simulated payment provider takes no money" in (
        done.stderr
    ), done.stderr[-1000:]
    assert "PAYMENT_PROVIDER=stripe" in done.stderr  # what to do instead
    assert "ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL=1" in done.stderr
    # named outright, it is refused the same way
    named = manage({**DEFAULTS, "PAYMENT_PROVIDER": "simulated"}, "check")
    assert named.returncode != 0 and "PAYMENT_PROVIDER=simulated: the simulated" in named.stderr


def test_control_a_real_provider_or_a_declared_rehearsal_starts() -> None:
    real = manage({**DEFAULTS, **STRIPE}, "check")
    rehearsal = manage({**DEFAULTS, "ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL": "1"}, "check")
    not_declared = manage({**DEFAULTS, "ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL": "0"}, "check")
    dev = manage({"FLOODGATE_PROFILE": "dev"}, "check")

    assert real.returncode == 0, real.stderr[-1000:]
    assert rehearsal.returncode == 0, rehearsal.stderr[-1000:]
    assert not_declared.returncode != 0 and "takes no money" in not_declared.stderr
    assert dev.returncode == 0, dev.stderr[-1000:]  # a laptop plays with the simulator


def test_every_process_refuses_the_simulator_in_production() -> None:
    """Not only manage.py: the web server and Celery load the same settings and stop on them."""
    bin_dir = Path(sys.executable).parent
    base = {k: v for k, v in os.environ.items() if k not in {"FLOODGATE_PROFILE", "DEBUG", "SECRET_KEY"}}
    commands = {
        "web": [str(bin_dir / "floodgate-web"), "--host", "127.0.0.1", "--port", str(free_port())],
        "worker": [str(bin_dir / "celery"), "-A", "shop.celery:app", "worker", "--pool", "solo"],
        "beat": [str(bin_dir / "celery"), "-A", "shop.celery:app", "beat", "-s", "/nonexistent/beat"],
    }
    for name, command in commands.items():
        done = subprocess.run(
            command, cwd=ROOT, env={**base, **DEFAULTS}, text=True, capture_output=True, timeout=60
        )
        said = done.stdout + done.stderr
        assert done.returncode != 0, (name, said[-1500:])
        assert "the simulated payment provider takes no money" in said, (name, said[-1500:])


@pytest.mark.parametrize(
    "weak",
    [
        "x",  # the probe's
        "a-short-but-varied-key-0123456789",  # 33 characters
        "ab" * 40,  # long, two different characters
    ],
)
def test_production_refuses_a_secret_key_of_too_little_entropy(weak: str) -> None:
    done = manage({**PRODUCTION, "SECRET_KEY": weak}, "check")

    assert done.returncode != 0
    assert "SECRET_KEY is too weak for production" in done.stderr, done.stderr[-1000:]
    assert "secrets.token_urlsafe" in done.stderr  # says how to make one


def test_control_a_generated_secret_key_starts_and_dev_takes_any() -> None:
    import secrets

    assert manage({**PRODUCTION, "SECRET_KEY": secrets.token_urlsafe(50)}, "check").returncode == 0
    assert manage({"FLOODGATE_PROFILE": "dev", "SECRET_KEY": "x"}, "check").returncode == 0


def test_buyers_are_sent_only_to_the_configured_providers_own_origin_by_default() -> None:
    from ast import literal_eval

    from checkout.redirects import allowed

    simulated = literal_eval(settings_value(PRODUCTION, "PAYMENT_PROVIDER_PUBLIC_PREFIXES"))
    stripe = literal_eval(settings_value({**DEFAULTS, **STRIPE}, "PAYMENT_PROVIDER_PUBLIC_PREFIXES"))
    narrow = {**PRODUCTION, "PAYMENT_PROVIDER_PUBLIC_PREFIXES": "https://a.example"}
    narrowed = literal_eval(settings_value(narrow, "PAYMENT_PROVIDER_PUBLIC_PREFIXES"))

    assert simulated == ("https://pay.example",)  # PAYMENT_PROVIDER_URL's origin
    assert stripe == ("https://shop.example",)  # Stripe's pay page is the shop's own (PUBLIC_BASE_URL)
    assert allowed("https://pay.example/pay/ses_1", simulated)
    assert allowed("https://shop.example/checkout/stripe/pi_1", stripe)
    for entries in (simulated, stripe):
        assert not allowed("https://evil.example/pay/ses_1", entries)  # was allowed: any https:// host
    assert narrowed == ("https://a.example",)  # the setting still wins
