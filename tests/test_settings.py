"""Production settings are safe by default; the deploy checklist is clean."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_production_profile_passes_check_deploy() -> None:
    done = manage(
        {
            "SECRET_KEY": "x" * 32 + "-production-secret-of-enough-length-and-variety-9f3",
            "ALLOWED_HOSTS": "shop.example",
            "PAYMENT_PROVIDER_SECRET": "provider-api-key",
            "PAYMENT_WEBHOOK_SECRET": "provider-webhook-secret",
            "PAYMENT_PROVIDER_URL": "https://pay.example",
            "PUBLIC_BASE_URL": "https://shop.example",
        },
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


def settings_value(env: dict[str, str], name: str) -> str:
    code = f"from django.conf import settings; print(repr(settings.{name}))"
    done = manage(env, "shell", "-c", code)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]  # after what shell says it imported


def test_x_forwarded_proto_is_believed_only_behind_a_trusted_proxy() -> None:
    assert settings_value(PRODUCTION, "SECURE_PROXY_SSL_HEADER") == "None"
    behind = settings_value({**PRODUCTION, "TRUST_X_FORWARDED_FOR": "1"}, "SECURE_PROXY_SSL_HEADER")
    assert behind == "('HTTP_X_FORWARDED_PROTO', 'https')"
