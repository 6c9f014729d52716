"""`manage.py check --deploy` and floodgate-web's start find a configuration that cannot take a
payment or render a page (ops/checks.py), each against a control configuration that passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders

from core import env
from devtools.ports import free_port
from ops import checks
from tests.conftest import STRIPE_PUBLISHABLE_KEY, STRIPE_SECRET_KEY, STRIPE_WEBHOOK_SECRET, wait_for_port
from tests.test_settings import PRODUCTION, ROOT, manage

pytestmark = pytest.mark.servers  # manage.py check --deploy in processes of its own

WEB = str(Path(sys.executable).parent / "floodgate-web")


def write_manifest(static_root: Path, *, leave_out: str = "") -> Path:
    """A manifest as collectstatic writes one, naming every static file the shop has (its own and
    its apps'); the check reads which files it names, not the hashed copies."""
    paths = {
        path.replace("\\", "/"): path
        for finder in finders.get_finders()
        for path, _storage in finder.list([])
        if path != leave_out
    }
    static_root.mkdir(parents=True, exist_ok=True)
    manifest = {"paths": paths, "version": "1.1", "hash": "0"}
    (static_root / "staticfiles.json").write_text(json.dumps(manifest))
    return static_root


@pytest.fixture
def stripe_shop(tmp_path: Path) -> dict[str, str]:
    """A production configuration taking money with Stripe, static files collected: nothing wrong."""
    return {
        **PRODUCTION,
        "PAYMENT_PROVIDER": "stripe",
        "STRIPE_SECRET_KEY": STRIPE_SECRET_KEY,
        "STRIPE_PUBLISHABLE_KEY": STRIPE_PUBLISHABLE_KEY,
        "STRIPE_WEBHOOK_SECRET": STRIPE_WEBHOOK_SECRET,
        "STATIC_ROOT": str(write_manifest(tmp_path / "static")),
    }


def deploy_check(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return manage(env, "check", "--deploy", "--fail-level", "WARNING")


def test_the_control_stripe_configuration_passes_check_deploy(stripe_shop: dict[str, str]) -> None:
    done = deploy_check(stripe_shop)

    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("change", "said"),
    [
        # the allow-list names the provider's domain but not the shop's own (its pay page)
        ({"PAYMENT_PROVIDER_PUBLIC_PREFIXES": "https://pay.example"}, "floodgate.E001"),
        # a near miss: the shop moved to the bare domain, the list still names www
        (
            {
                "PUBLIC_BASE_URL": "https://shop.example",
                "PAYMENT_PROVIDER_PUBLIC_PREFIXES": "https://www.shop.example",
            },
            "floodgate.E001",
        ),
        ({"STRIPE_SECRET_KEY": STRIPE_PUBLISHABLE_KEY}, "floodgate.E003"),  # the wrong key pasted
        ({"STRIPE_WEBHOOK_SECRET": "sk_test_not_a_signing_secret"}, "floodgate.E003"),
        ({"STRIPE_PUBLISHABLE_KEY": "pk_live_floodgate"}, "floodgate.E003"),  # test and live mixed
        ({"STRIPE_API_BASE": "http://127.0.0.1:12111"}, "floodgate.E004"),  # localstripe left in
    ],
)
def test_check_deploy_fails_on_a_payment_misconfiguration(
    stripe_shop: dict[str, str], change: dict[str, str], said: str
) -> None:
    done = deploy_check({**stripe_shop, **change})

    assert done.returncode != 0
    assert said in done.stderr, done.stdout + done.stderr


def test_missing_stripe_keys_fail_in_production_and_in_check_deploy(stripe_shop: dict[str, str]) -> None:
    # the production profile refuses before any check runs
    production = deploy_check({**stripe_shop, "STRIPE_SECRET_KEY": ""})
    assert production.returncode != 0 and "STRIPE_SECRET_KEY is not set" in production.stderr
    # a profile that loads without them (dev): check --deploy names each missing one
    dev = {**stripe_shop, "FLOODGATE_PROFILE": "dev", "STRIPE_SECRET_KEY": "", "STRIPE_WEBHOOK_SECRET": ""}
    done = deploy_check(dev)
    assert done.returncode != 0
    assert done.stderr.count("floodgate.E002") == 2 and "STRIPE_WEBHOOK_SECRET is not set" in done.stderr


def test_check_deploy_fails_without_the_static_manifest_or_with_a_stale_one(
    stripe_shop: dict[str, str], tmp_path: Path
) -> None:
    missing = deploy_check({**stripe_shop, "STATIC_ROOT": str(tmp_path / "never-collected")})
    stale_root = write_manifest(tmp_path / "stale", leave_out="js/stripe-pay.js")
    stale = deploy_check({**stripe_shop, "STATIC_ROOT": str(stale_root)})

    assert missing.returncode != 0 and "floodgate.E005" in missing.stderr, missing.stderr
    assert stale.returncode != 0 and "floodgate.E006" in stale.stderr and "js/stripe-pay.js" in stale.stderr


def web_env(env: dict[str, str]) -> dict[str, str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"FLOODGATE_PROFILE", "DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    }
    return {**base, **env}


def test_floodgate_web_refuses_to_start_on_a_payment_misconfiguration(stripe_shop: dict[str, str]) -> None:
    env = {**stripe_shop, "PAYMENT_PROVIDER_PUBLIC_PREFIXES": "https://pay.example"}
    port = free_port()
    done = subprocess.run(
        [WEB, "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=ROOT,
        env=web_env(env),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode != 0
    assert "REFUSED floodgate.E001" in done.stderr and "not starting" in done.stderr, done.stderr


def test_floodgate_web_starts_without_the_static_manifest_and_says_so_loudly(
    stripe_shop: dict[str, str], tmp_path: Path
) -> None:
    env = {**stripe_shop, "STATIC_ROOT": str(tmp_path / "never-collected"), "ALLOWED_HOSTS": "127.0.0.1"}
    port = free_port()
    log = tmp_path / "web.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [WEB, "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            cwd=ROOT,
            env=web_env(env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_port(port, process, log, timeout=60)  # it serves (the API and the queue need no files)
    finally:
        process.terminate()
        process.wait(20)
    assert "WARNING floodgate.E005" in log.read_text() and "REFUSED" not in log.read_text()


def test_the_deploy_check_refuses_the_dev_key_and_garbage_and_passes_a_real_key(settings) -> None:
    settings.PUBLIC_BASE_URL = "https://shop.example"
    settings.WEB_PUSH_SUBJECT = ""
    settings.WEB_PUSH_VAPID_KEY = env.DEV_VAPID_KEY
    assert [e.id for e in checks.web_push()] == [checks.WEB_PUSH_KEY_WRONG]
    assert "published development value" in checks.web_push()[0].msg
    settings.WEB_PUSH_VAPID_KEY = "not-a-key"
    assert [e.id for e in checks.web_push()] == [checks.WEB_PUSH_KEY_WRONG]
    settings.WEB_PUSH_VAPID_KEY = "fgB0Wb2lYdwqO50R_F8eAZ6SPFRHJXy3B6RQZf6Kzik".replace("f", "g", 1)
    assert checks.web_push() == []
    settings.WEB_PUSH_SUBJECT = "ftp://shop.example"  # a contact the push services refuse
    assert [e.id for e in checks.web_push()] == [checks.WEB_PUSH_KEY_WRONG]
    settings.WEB_PUSH_VAPID_KEY = ""  # push off: nothing to check
    assert checks.web_push() == []


def test_production_refuses_the_dev_vapid_key_and_has_push_off_without_one(
    tmp_path: Path,
) -> None:
    static = str(write_manifest(tmp_path / "static"))
    done = manage(
        {**PRODUCTION, "STATIC_ROOT": static, "WEB_PUSH_VAPID_KEY": env.DEV_VAPID_KEY}, "check", "--deploy"
    )
    assert done.returncode != 0 and "floodgate.E007" in done.stderr + done.stdout
    show = "from django.conf import settings; print(repr(settings.WEB_PUSH_VAPID_KEY))"
    off = manage({**PRODUCTION, "STATIC_ROOT": static}, "shell", "-c", show)
    assert off.stdout.splitlines()[-1] == "''", off.stderr
