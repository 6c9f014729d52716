"""docker-compose.yml (Docker cannot run here): every service's command exists in the project."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import yaml
from django.core.management import get_commands

from config.web import APP, parse

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def resolve(target: str) -> object:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def test_compose_has_the_production_shape_with_health_checks() -> None:
    services = compose()["services"]

    assert {"postgres", "redis", "migrate", "web1", "web2", "worker", "beat"} <= set(services)
    for name, service in services.items():
        if name != "migrate":
            assert "healthcheck" in service, name


def test_every_service_command_exists_in_the_project() -> None:
    for name, service in compose()["services"].items():
        command = service.get("command")
        if name in {"postgres", "redis"}:
            continue
        program, *args = command
        if program == "python":
            assert args[0] == "manage.py" and (ROOT / "manage.py").exists()
            assert args[1] in get_commands(), f"{name}: no management command {args[1]}"
        elif program == "daphne":
            assert (BIN / "daphne").exists() or shutil.which("daphne")
            assert callable(resolve(args[-1])), name
        elif program == "floodgate-web":
            assert (BIN / "floodgate-web").exists() or shutil.which("floodgate-web")
            served = parse(args)
            assert (served.host, served.port) == ("0.0.0.0", 8000), name
            assert callable(resolve(APP)), name
        elif program == "celery":
            app = resolve(args[args.index("-A") + 1])
            assert app.main == "floodgate", name
            assert args[args.index("-A") + 2] in {"worker", "beat"}
        else:
            raise AssertionError(f"{name}: unknown program {program}")


def test_both_web_instances_run_the_production_server() -> None:
    services = compose()["services"]

    for name in ("web1", "web2"):
        assert services[name]["command"][0] == "floodgate-web", name
    # The public name (DESIGN section 11) still imports, as the very application floodgate-web serves.
    assert resolve("shop.asgi:application") is resolve(APP)


def test_dockerfile_installs_the_project() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    cmd = next(line for line in dockerfile.splitlines() if line.startswith("CMD "))
    assert "pip install" in dockerfile
    assert yaml.safe_load(cmd.removeprefix("CMD ")) == compose()["services"]["web1"]["command"]
    assert all(
        service.get("build") == "."
        for name, service in compose()["services"].items()
        if name not in {"postgres", "redis"}
    )
