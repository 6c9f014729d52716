"""The production image runs what docker-compose.yml asks (Docker cannot run here, so its
environment is built the way the Dockerfile builds it, and every service's own command started).

As the Dockerfile does: the project's files copied into a folder root owns, installed with pip
(no dev extras) into a Python no user's home holds (Debian's; a venv here where the image has its
own), static files collected as root, the folders the image hands its user made and handed over;
then migrate, web, worker, beat and the simulated provider run as an unprivileged user with the
compose files' environment (docker-compose.rehearsal.yml laid over docker-compose.yml: a rehearsal
environment; the host-specific parts, addresses and ports, pointed at this machine). A merchant
then logs in to the admin through the TLS proxy's headers, uploads a product picture (served
back from the media volume) and starts a rehearsal (its report is written where the admin
finds it).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest
import yaml
from django.conf import settings
from PIL import Image as PILImage

from devtools.faults import one_cluster
from devtools.ports import free_port
from tests.conftest import wait_for_port

ROOT = Path(__file__).resolve().parent.parent
PYTHON = "/usr/bin/python3"  # Debian's: the project's own may live in root's home, out of a user's reach
USER = "floodgate-image"
VENV_CACHE = Path("/var/cache/floodgate-image")
STATIC_CACHE = VENV_CACHE / "collected-static"
# What compose leaves to the operator (${NAME:?...}): any values that are not the dev ones.
OPERATOR = {
    "SECRET_KEY": "image-test-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    "PAYMENT_PROVIDER_SECRET": "image-provider-secret",
    "PAYMENT_WEBHOOK_SECRET": "image-webhook-secret",
    "DB_PASSWORD": "imagedbpassword",  # the URLs below point at this machine's servers instead
    "REDIS_PASSWORD": "imageredispassword",
}
APP_SERVICES = ["migrate", "web", "worker", "beat", "provider"]
# servers: the image's environment on Debian's Python
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.servers]


def compose() -> dict:
    """docker-compose.yml with docker-compose.rehearsal.yml laid over it, as compose merges them (a
    service's maps key by key): this is a rehearsal environment, its crowd pays with the simulator."""
    base = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    overlay = yaml.safe_load((ROOT / "docker-compose.rehearsal.yml").read_text())
    for name, service in overlay["services"].items():
        into = base["services"].setdefault(name, {})
        for key, value in service.items():
            into[key] = {**into.get(key, {}), **value} if isinstance(value, dict) else value
    return base


def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def handed_to_the_user() -> list[str]:
    """The folders the Dockerfile makes and hands to its user (`chown floodgate ... /a /b`)."""
    found = re.search(r"chown\s+(?:-R\s+)?floodgate(?::floodgate)?\s+([^\n&\\]+)", dockerfile())
    return found.group(1).split() if found else []


def resolved(value: object) -> str:
    """A compose value with ${NAME:?message} from OPERATOR and ${NAME:-default} as its default."""

    def one(match: re.Match[str]) -> str:
        name, kind, rest = match.group(1), match.group(2), match.group(3)
        if kind == ":?":
            return OPERATOR[name]
        return os.environ.get(name, rest) if name == "PATH" else rest

    return re.sub(r"\$\{([A-Z_]+)(:\?|:-)([^}]*)\}", one, str(value))


@dataclass
class Image:
    root: Path  # what / is to the image: app/, media/, rehearsals/, tmp/ under it
    venv: Path
    env: dict[str, str]  # the compose environment with this machine's addresses
    port: int
    provider_port: int
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def path(self, inside: str) -> Path:
        """Where a path of the image (/media, /tmp/x) is here."""
        return self.root / inside.lstrip("/")

    def command(self, service: str) -> list[str]:
        """The service's command from compose, its programs from the image's Python, its paths here."""
        words = [resolved(w) for w in compose()["services"][service]["command"]]
        words = [str(self.path(w)) if w.startswith("/tmp/") else w for w in words]
        if words[0] in {"python", "floodgate-web", "celery", "daphne"}:
            words[0] = str(self.venv / "bin" / words[0])
        if service == "web":
            words[words.index("--port") + 1] = str(self.port)
            words[words.index("--host") + 1] = "127.0.0.1"
            words += ["--workers", "1"]
        if service == "worker":
            words[words.index("--concurrency") + 1] = "1"
        if service == "provider":
            words[words.index("-p") + 1] = str(self.provider_port)
            words[words.index("-b") + 1] = "127.0.0.1"
        return words

    def run(self, service: str) -> subprocess.Popen[bytes]:
        """The service in the background, its output in <root>/<service>.log."""
        with open(self.root / f"{service}.log", "wb") as out:
            process = subprocess.Popen(
                self.command(service), stdout=out, stderr=subprocess.STDOUT, **self.as_app(service)
            )
        self.processes[service] = process
        return process

    def run_to_end(self, service: str) -> subprocess.CompletedProcess[str]:
        """A one-off service (migrate), run to its end."""
        return subprocess.run(
            self.command(service), capture_output=True, text=True, timeout=300, **self.as_app(service)
        )

    def as_app(self, service: str) -> dict[str, Any]:
        """subprocess's options for every service: in /app, as the image's user, in a session of its own."""
        account = pwd.getpwnam(USER)
        return {
            "cwd": self.path("/app"),
            "env": self.service_env(service),
            "user": account.pw_uid,
            "group": account.pw_gid,
            "extra_groups": [],
            "start_new_session": True,
        }

    def service_env(self, service: str) -> dict[str, str]:
        own = compose()["services"][service].get("environment", {})
        if service == "provider":  # not an app service: its own environment alone
            return {
                **{k: resolved(v) for k, v in own.items()},
                "PROVIDER_PUBLIC_URL": self.env["PAYMENT_PROVIDER_PUBLIC_PREFIXES"],
                "PATH": f"{self.venv / 'bin'}:/usr/bin:/bin",
                "HOME": "/nonexistent",
            }
        declared = {**compose()["x-app"]["environment"], **own}
        env = {k: resolved(v) for k, v in declared.items() if k != "<<"}
        for name in ("MEDIA_ROOT", "REHEARSAL_DIR"):
            if name in env:
                env[name] = str(self.path(env[name]))
        return {
            **env,
            **self.env,
            "PATH": f"{self.venv / 'bin'}:/usr/bin:/bin",
            "HOME": "/nonexistent",
            "TMPDIR": str(self.path("/tmp")),
        }

    def log(self, service: str) -> str:
        return (self.root / f"{service}.log").read_text(errors="replace")

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def dependencies_key() -> str:
    """The dependencies' layer's version: what pip installs into it (the project's dependencies,
    no extras, as the Dockerfile's install) and the Python; not the tools' settings beside them in
    pyproject.toml, which change nothing the layer holds."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = json.dumps([project["dependencies"], project.get("requires-python"), PYTHON])
    return hashlib.sha256(wanted.encode()).hexdigest()[:16]


def build(root: Path) -> Path:
    """The Dockerfile's build: files copied (root-owned), pip install, collectstatic as root."""
    assert re.search(r"pip install --no-cache-dir -e \.(\s|$)", dockerfile()), "the Dockerfile's install"
    assert "[dev]" not in dockerfile()
    app = root / "app"
    shutil.copytree(
        ROOT,
        app,
        ignore=shutil.ignore_patterns(".venv", ".data", ".git", "__pycache__", "shots", "*.egg-info"),
    )
    # The dependencies' layer, kept between runs as Docker keeps the layer of the Dockerfile's
    # first install: per version of the dependencies (not of every line of pyproject.toml: a
    # tool's setting rebuilt minutes of pip), outside any home (the image's user reads it).
    key = dependencies_key()
    venv = VENV_CACHE / f"venv-{key}"
    ready = venv / "dependencies-installed"
    if not ready.exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([PYTHON, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", *(["--no-deps"] if ready.exists() else []), "-e", "."],
        cwd=app, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    ready.touch()
    build_env = re.search(
        r"(SECRET_KEY=build-only.*?) python manage.py collectstatic", dockerfile(), re.DOTALL
    )
    assert build_env is not None
    values = dict(w.split("=", 1) for w in shlex.split(build_env.group(1).replace("\\\n", " ")))
    # collectstatic's layer (a minute: whitenoise compresses every file twice over), kept like the
    # dependencies' one, per version of everything it reads: the installed packages (their static
    # files, Django's and whitenoise's code), the project's static files, the settings package
    # (STORAGES, STATIC_ROOT, the apps) and the build step's command and environment. Anything
    # else changes, or a first run: collected by the Dockerfile's command, as root, and kept.
    layer = STATIC_CACHE / f"static-{static_key(app, key, values)}"
    if layer.is_dir():
        shutil.copytree(layer, app / "staticfiles", dirs_exist_ok=True)
        return venv
    collected = subprocess.run(
        [str(venv / "bin" / "python"), "manage.py", "collectstatic", "--no-input", "-v0"],
        cwd=app, env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", **values}, capture_output=True, text=True,
    )  # fmt: skip
    assert collected.returncode == 0, collected.stderr[-3000:]
    keep_layer(app / "staticfiles", layer)
    return venv


def static_key(app: Path, dependencies: str, values: dict[str, str]) -> str:
    """What collectstatic's output depends on, hashed (see build)."""
    digest = hashlib.sha256(dependencies.encode())
    digest.update(repr(sorted(values.items())).encode())
    step = re.search(r"^.*collectstatic.*$", dockerfile(), re.MULTILINE)
    assert step is not None
    digest.update(step.group(0).encode())
    read = sorted(
        path
        for path in app.rglob("*")
        if path.is_file()
        and (path.relative_to(app).parts[0] == "config" or "static" in path.relative_to(app).parts[:-1])
    )
    for path in read:
        digest.update(str(path.relative_to(app)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def keep_layer(collected: Path, layer: Path) -> None:
    """Keep a copy of collectstatic's output (written aside, then renamed: runs share the cache);
    only the newest few layers stay."""
    STATIC_CACHE.mkdir(parents=True, exist_ok=True)
    aside = STATIC_CACHE / f".{layer.name}-{os.getpid()}"
    shutil.rmtree(aside, ignore_errors=True)
    shutil.copytree(collected, aside)
    try:
        aside.rename(layer)
    except OSError:  # another run kept the same layer first
        shutil.rmtree(aside, ignore_errors=True)
    layers = sorted(STATIC_CACHE.glob("static-*"), key=lambda path: path.stat().st_mtime, reverse=True)
    for old in layers[3:]:
        shutil.rmtree(old, ignore_errors=True)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory, django_db_setup: None) -> Iterator[Image]:
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True
        )
    account = pwd.getpwnam(USER)
    root = tmp_path_factory.mktemp("image")
    for folder in (root, *root.parents):  # the user must reach the image's files, as in a container
        if folder == Path("/"):
            break
        folder.chmod(folder.stat().st_mode | 0o755)
    venv = build(root)
    for inside in handed_to_the_user():  # RUN mkdir -p ... && chown floodgate ...
        (root / inside.lstrip("/")).mkdir(parents=True, exist_ok=True)
        os.chown(root / inside.lstrip("/"), account.pw_uid, account.pw_gid)
    (root / "tmp").mkdir()
    (root / "tmp").chmod(0o1777)

    # A PostgreSQL of its own on TCP, as compose's: the suite's may listen on a socket in a folder
    # only root and its server's user can reach, and a migrate from scratch is part of the test.
    database = one_cluster(root / "postgres")
    url = database.url("floodgate")
    port, provider_port = free_port(), free_port()
    redis = urlunsplit(urlsplit(settings.REDIS_URL)._replace(path="/11"))  # its own broker and cache
    found = Image(
        root,
        venv,
        {
            "DATABASE_URL": url,  # compose: through PgBouncer; here straight to the server
            "DB_POOLER": "",
            "REDIS_URL": redis,
            "DB_POOL_MAX_SIZE": "4",
            "DB_POOL_MIN_SIZE": "1",
            "PAYMENT_PROVIDER_URL": f"http://127.0.0.1:{provider_port}",
            "PAYMENT_PROVIDER_PUBLIC_PREFIXES": f"http://localhost:{provider_port}",
            "PUBLIC_BASE_URL": f"http://localhost:{port}",
            # No TLS proxy stands in front here: the admin's requests carry its X-Forwarded-Proto,
            # but the rehearsal's crowd speaks plain HTTP to PUBLIC_BASE_URL, which would be
            # redirected to an https:// nobody serves.
            "SECURE_SSL_REDIRECT": "0",
        },
        port,
        provider_port,
    )
    subprocess.run([str(venv / "bin" / "celery"), "-A", "shop.celery:app", "purge", "-f"],
                   cwd=root / "app", env=found.service_env("worker"), capture_output=True)  # fmt: skip
    try:
        yield found
    finally:
        found.stop()
        database.run("pg_ctl", "-D", str(database.folder), "-m", "immediate", "stop", check=False)


def test_the_image_hands_its_user_every_folder_compose_writes_to() -> None:
    handed = set(handed_to_the_user())
    services = compose()["services"]
    writes = {
        services["web"]["environment"]["MEDIA_ROOT"],
        compose()["x-app"]["environment"]["REHEARSAL_DIR"],
    }
    mounted = {volume.split(":")[1] for name in APP_SERVICES for volume in services[name].get("volumes", [])}
    assert writes <= handed and mounted <= handed, (writes, mounted, handed)
    assert re.search(r"^USER floodgate$", dockerfile(), re.MULTILINE)


def proxied(image: Image) -> dict[str, str]:
    """What the TLS proxy and the balancer in front add (compose trusts both: TRUSTED_PROXY_HOPS=2)."""
    forwarded = "203.0.113.9, 10.0.0.2"  # the client (appended by the TLS proxy), the TLS proxy
    return {"Host": f"localhost:{image.port}", "X-Forwarded-Proto": "https", "X-Forwarded-For": forwarded}


class Browser:
    """An HTTP client that keeps the shop's Secure cookies though it speaks plain HTTP to the
    web process (the proxy in front would have spoken HTTPS to the browser)."""

    def __init__(self, image: Image) -> None:
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{image.port}", timeout=30, trust_env=False)
        self.headers = {**proxied(image), "Origin": f"https://localhost:{image.port}"}
        self.cookies: dict[str, str] = {}

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        cookie = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        answer = self.client.request(method, path, headers={**self.headers, "Cookie": cookie}, **kwargs)
        for header in answer.headers.get_list("set-cookie"):
            name, _, rest = header.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        return answer

    def csrf(self, path: str) -> str:
        page = self.send("GET", path)
        assert page.status_code == 200, (path, page.status_code, page.text[:500])
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert found, page.text[:500]
        return found.group(1)


def picture() -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (64, 48), (200, 30, 30)).save(out, format="PNG")
    return out.getvalue()


@pytest.mark.timeout(900)  # the build (pip) and a rehearsal's crowd
def test_every_compose_service_runs_from_the_image_and_the_admin_uploads_and_rehearses(image: Image) -> None:
    migrated = image.run_to_end("migrate")
    assert migrated.returncode == 0, migrated.stdout[-3000:] + migrated.stderr[-3000:]
    assert "Applying shop.0001" in migrated.stdout

    web = image.run("web")
    wait_for_port(image.port, web, image.root / "web.log", timeout=60)
    image.run("worker")
    image.run("beat")
    provider = image.run("provider")
    wait_for_port(image.provider_port, provider, image.root / "provider.log")
    health = httpx.get(f"http://127.0.0.1:{image.port}/healthz", headers=proxied(image), trust_env=False)
    assert health.status_code == 200, health.text

    env = image.service_env("web")
    account = pwd.getpwnam(USER)
    manage = [str(image.venv / "bin" / "python"), "manage.py"]
    as_user: dict[str, Any] = {
        "cwd": image.path("/app"),
        "user": account.pw_uid,
        "group": account.pw_gid,
        "extra_groups": [],
    }
    made = subprocess.run(
        [*manage, "createsuperuser", "--no-input", "--username", "merchant", "--email", "m@example.com"],
        env={**env, "DJANGO_SUPERUSER_PASSWORD": "a merchant's long password"},
        capture_output=True, text=True, **as_user,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    drop = subprocess.run(
        [*manage, "create_drop", "--slug", "image-drop", "--quantity", "20", "--starts-in", "3600"],
        env=env, capture_output=True, text=True, **as_user,
    )  # fmt: skip
    assert drop.returncode == 0, drop.stderr

    merchant = Browser(image)
    token = merchant.csrf("/admin/login/")
    logged_in = merchant.send(
        "POST",
        "/admin/login/?next=/admin/",
        data={"csrfmiddlewaretoken": token, "username": "merchant", "password": "a merchant's long password"},
    )
    assert logged_in.status_code == 302, logged_in.text[:1000]

    # A product picture, uploaded in the admin: written to the media volume, served back.
    token = merchant.csrf("/admin/shop/product/add/")
    added = merchant.send(
        "POST",
        "/admin/shop/product/add/",
        data={
            "csrfmiddlewaretoken": token, "sku": "IMG-2", "name": "Pictured", "description": "",
            "price": "19.00", "currency": "EUR", "image_url": "",
        },
        files={"image": ("boot.png", picture(), "image/png")},
    )  # fmt: skip
    assert added.status_code == 302, re.findall(r'class="errorlist[^>]*>(.*?)</ul>', added.text, re.DOTALL)
    stored = list(image.path("/media").rglob("boot*.png"))
    assert len(stored) == 1 and stored[0].stat().st_uid == account.pw_uid, stored
    served = merchant.send("GET", "/media/" + str(stored[0].relative_to(image.path("/media"))))
    assert served.status_code == 200 and served.content == picture()

    # A rehearsal of the drop, started from the admin's action: its report lands where the admin reads it.
    token = merchant.csrf("/admin/shop/drop/")
    with psycopg.connect(image.env["DATABASE_URL"]) as conn:
        row = conn.execute("SELECT id FROM shop_drop WHERE slug = 'image-drop'").fetchone()
        assert row is not None
        (drop_id,) = row
    started = merchant.send(
        "POST",
        "/admin/shop/drop/",
        data={
            "csrfmiddlewaretoken": token,
            "action": "rehearse_drop",
            "_selected_action": str(drop_id),
            "buyers": "30",
        },
    )
    assert started.status_code == 302, started.text[:2000]
    reports = image.path(compose()["x-app"]["environment"]["REHEARSAL_DIR"])
    deadline = time.monotonic() + 180
    # the report is kept in the database: the admin page answers it once the rehearsal is over
    while (page := merchant.send("GET", f"/admin/shop/drop/{drop_id}/rehearsal/")).status_code == 404:
        rehearsal_log = next(iter(reports.glob("*.log")), None)
        assert time.monotonic() < deadline, rehearsal_log.read_text()[-3000:] if rehearsal_log else "no log"
        time.sleep(1)
    said = next(reports.glob("*.log")).read_text()
    assert re.search(r"answers in .* 0 errors", said), said[-3000:]  # the crowd reserved and paid
    assert re.search(r"orders confirmed [1-9]", said), said[-3000:]
    assert page.status_code == 200 and "image-drop" in page.text
    for service, process in image.processes.items():
        assert process.poll() is None, f"{service} died:\n{image.log(service)[-3000:]}"
