#!/usr/bin/env python3
"""Set up Floodgate on this machine and run it: `python3 floodgate.py run | test | manage | bench |
shots | prove | rehearse`.

Needs only python3. Creates `.venv`, installs the project when pyproject.toml
changed (`run`, `manage` and `rehearse` only what the store needs; `test`, `bench`, `shots` and
`prove` the toolchain too), installs Debian's Chromium for the browser tests when it is missing,
then hands over to `devtools.devstack` inside the virtualenv.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
STAMP = VENV / ".floodgate-installed"
CHROMIUM = "/usr/bin/chromium"
PROMTOOL = "/usr/bin/promtool"
PGBOUNCER = "/usr/sbin/pgbouncer"
HAPROXY = "/usr/sbin/haproxy"
# python3-venv brings ensurepip for Debian's Python (its minor version is the distribution's)
DEBIAN_VENV = next(
    iter(sorted(glob.glob("/usr/lib/python3.*/ensurepip/__init__.py"))), "/usr/lib/python3/ensurepip"
)


def say(message: str) -> None:
    print(f"floodgate: {message}", flush=True)


def ensure_virtualenv(*, toolchain: bool) -> None:
    """The store's dependencies; with `toolchain`, the test and bench tools too (pytest, Playwright,
    mypy, ...), which the store never imports. The stamp says which set is in for which pyproject."""
    if not PYTHON.exists():
        say("creating .venv")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    installed = STAMP.read_text().split() if STAMP.exists() else []
    if installed[:1] == [wanted] and (installed[1:] == ["toolchain"] or not toolchain):
        return
    what = "the store's and the test toolchain's dependencies" if toolchain else "the store's dependencies"
    say(f"installing {what} into .venv (first run takes a minute)")
    pip = [str(PYTHON), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "--upgrade", "pip"], check=True)
    subprocess.run([*pip, "install", "-e", f"{ROOT}[dev]" if toolchain else str(ROOT)], check=True)
    STAMP.write_text(f"{wanted} {'toolchain' if toolchain else 'store'}")


def ensure_debian_package(package: str, binary: str, needed_for: str, *, recommends: bool = True) -> None:
    """Install a Debian package when its binary is missing (as root, with apt); else say how."""
    if Path(binary).exists():
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        sys.exit(f"floodgate: {needed_for} needs {binary}. Install Debian's `{package}` package.")
    say(f"installing Debian's {package} for {needed_for}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    extra = [] if recommends else ["--no-install-recommends"]
    subprocess.run(["apt-get", "install", "-y", "-qq", *extra, package], check=True, env=env)


def main(argv: list[str]) -> None:
    if not argv or argv[0] not in {"run", "test", "manage", "bench", "shots", "prove", "rehearse"}:
        sys.exit(
            "usage: python3 floodgate.py run | test [--fast] [pytest args] | manage <command>"
            " | bench <name> [args] | shots [folder] [--lang de] | prove failover|faults|partitions|compose"
            " | rehearse SLUG [--buyers N] [--base URL]"
        )
    # run, manage and rehearse need only the store; the rest test, measure or photograph it
    ensure_virtualenv(toolchain=argv[0] in {"test", "bench", "shots", "prove"})
    full_test = argv[0] == "test" and "--fast" not in argv  # the fast tier needs none of them
    if (full_test or argv[0] == "shots") and not os.environ.get("CHROMIUM_PATH"):
        ensure_debian_package("chromium", CHROMIUM, f"{argv[0]} (the browser; or set CHROMIUM_PATH)")
    if full_test:
        # promtool checks and unit-tests the alerting rules (the server it ships is never started)
        ensure_debian_package("prometheus", PROMTOOL, "the alerting rules' tests", recommends=False)
        # the pooler tests run the races through a real PgBouncer; haproxy -c checks the balancer's
        # config before the suite starts servers of its own from it
        ensure_debian_package("pgbouncer", PGBOUNCER, "the PgBouncer tests", recommends=False)
        ensure_debian_package("haproxy", HAPROXY, "the balancer config check", recommends=False)
        # the Sentinel fault run: Debian's Redis server (a master and a replica) and its sentinels
        ensure_debian_package("redis-server", "/usr/bin/redis-server", "the Sentinel run", recommends=False)
        ensure_debian_package(
            "redis-sentinel", "/usr/bin/redis-sentinel", "the Sentinel run", recommends=False
        )
        # the image test builds the production environment on Debian's Python (outside root's home)
        ensure_debian_package("python3-venv", DEBIAN_VENV, "the production image test", recommends=False)
        ensure_debian_package("etcd-server", "/usr/bin/etcd", "the Patroni fault run", recommends=False)
        ensure_debian_package("iptables", "/usr/sbin/iptables", "the partition run", recommends=False)
        ensure_debian_package("wrk", "/usr/bin/wrk", "bench queue's suite run (the HTTP load generator)")
        # Debian 12's compose is v1 (1.29): the compose files must pass its interpolation too
        ensure_debian_package(
            "docker-compose", "/usr/bin/docker-compose", "the compose files' check", recommends=False
        )
    faults = argv[:2] == ["prove", "faults"]
    partitions = argv[:2] == ["prove", "partitions"]
    if faults or partitions:
        for package, binary in (
            ("redis-server", "/usr/bin/redis-server"),
            ("redis-sentinel", "/usr/bin/redis-sentinel"),
        ):
            ensure_debian_package(package, binary, " ".join(argv[:2]), recommends=False)
    if partitions:  # its hosts' faults are iptables rules in their namespaces; the shipped balancers
        ensure_debian_package("iptables", "/usr/sbin/iptables", "prove partitions", recommends=False)
        ensure_debian_package("haproxy", HAPROXY, "prove partitions", recommends=False)
        ensure_debian_package("pgbouncer", PGBOUNCER, "prove partitions", recommends=False)
    if argv[0] == "prove" and ("--patroni" in argv or faults or partitions):
        # Patroni runs on Debian's Python, in a venv of its own, with etcd as its store
        ensure_debian_package("etcd-server", "/usr/bin/etcd", "Patroni's store", recommends=False)
        ensure_debian_package("python3-venv", DEBIAN_VENV, "Patroni's venv", recommends=False)
    if argv[:2] == ["prove", "compose"] or full_test:
        # a dockerd of the run's own, and the Debian base its images are built on
        ensure_debian_package("docker.io", "/usr/sbin/dockerd", "prove compose", recommends=False)
        ensure_debian_package("debootstrap", "/usr/sbin/debootstrap", "prove compose", recommends=False)
        ensure_debian_package("iptables", "/usr/sbin/iptables", "prove compose", recommends=False)
    if argv[0] == "bench" and argv[1:2] == ["queue"]:
        ensure_debian_package("wrk", "/usr/bin/wrk", "bench queue (the HTTP load generator)")
    os.chdir(ROOT)
    os.execv(str(PYTHON), [str(PYTHON), "-m", "devtools.devstack", *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
