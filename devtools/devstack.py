"""Run the whole store, the tests, a benchmark, the screenshots or a proof: `python -m
devtools.devstack run|test|bench|shots|prove|rehearse`.

With DATABASE_URL / REDIS_URL unset, real PostgreSQL and Redis servers are
started from pip packages under `.data/` and stopped on exit.
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from devtools import embedded, rehearse
from devtools.ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def say(message: str) -> None:
    print(f"floodgate: {message}", flush=True)


@dataclass
class Stack:
    env: dict[str, str]  # what points the store at PostgreSQL and Redis
    dead: Callable[[], list[str]] = list  # the embedded servers this command started that stopped


@contextlib.contextmanager
def servers(data_dir: Path) -> Iterator[dict[str, str]]:
    """Yield the environment that points at PostgreSQL and Redis, starting embedded ones if unset."""
    with stack(data_dir) as found:
        yield found.env


@contextlib.contextmanager
def stack(data_dir: Path) -> Iterator[Stack]:
    env = {"FLOODGATE_PROFILE": os.environ.get("FLOODGATE_PROFILE", "dev")}
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        say("using DATABASE_URL and REDIS_URL from the environment")
        yield Stack(env)
        return
    if os.environ.get("DATABASE_URL") or os.environ.get("REDIS_URL"):
        sys.exit("floodgate: set both DATABASE_URL and REDIS_URL, or neither (embedded servers).")
    where = f"{data_dir.relative_to(ROOT) if data_dir.is_relative_to(ROOT) else data_dir}/"
    started = embedded.start(data_dir)
    if started.shared:
        say(f"using the embedded PostgreSQL and Redis already running in {where} (left running)")
    else:
        say(f"started embedded PostgreSQL and Redis in {where}")
    env |= {
        "DATABASE_URL": started.database_url,
        "REDIS_URL": started.redis_url,
        "PGBIN": str(started.pgbin),
    }
    try:
        yield Stack(env, started.dead)
    finally:
        started.stop()
        if not started.shared:
            say("embedded PostgreSQL and Redis stopped")


def manage(env: dict[str, str], *args: str, capture: bool = False) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        env={**os.environ, **env},
        check=True,
        text=True,
        stdout=subprocess.PIPE if capture else None,
    )
    return done.stdout or ""


def store_commands(
    port: str, provider_port: str, *, workers: str | None, data: Path = ROOT / ".data"
) -> dict[str, list[str]]:
    """The store's processes: the web tier, Celery's worker and beat, the simulated provider."""
    return {
        # The production server (config/web.py); WEB_WORKERS sets its processes (default: cores).
        "web": [
            str(BIN / "floodgate-web"),
            "--host",
            "127.0.0.1",
            "--port",
            port,
            *(["--workers", workers] if workers else []),
        ],
        "worker": [
            str(BIN / "celery"),
            "-A",
            "config.celery:app",
            "worker",
            "-l",
            "info",
            "--concurrency",
            "2",
        ],
        "beat": [
            str(BIN / "celery"),
            "-A",
            "config.celery:app",
            "beat",
            "-l",
            "info",
            "-s",
            str(data / "celerybeat-schedule"),
        ],
        "provider": [
            str(BIN / "daphne"),
            "-b",
            "127.0.0.1",
            "-p",
            provider_port,
            "devtools.provider_sim:app",
        ],
    }


def run_store() -> None:
    port = os.environ.get("PORT", "8000")
    data = Path(os.environ.get("FLOODGATE_DATA") or ROOT / ".data").resolve()
    with stack(data) as found:
        env = found.env
        manage(env, "migrate", "--no-input", "-v", "0")
        manage(env, "collectstatic", "--no-input", "-v", "0")
        provider_port = os.environ.get("PROVIDER_PORT", "8701")
        env |= {
            # The store as buyers meet it: its own 404 and 500 pages, not Django's debug pages
            # (tracebacks still go to this console). DEBUG=1 in the environment brings them back.
            "DEBUG": os.environ.get("DEBUG", "0"),
            "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
            "PAYMENT_PROVIDER_URL": f"http://127.0.0.1:{provider_port}",
            "PROVIDER_PUBLIC_URL": f"http://127.0.0.1:{provider_port}",
        }
        password, kept = admin_password(data / "admin-password")
        manage(env, "seed_demo", "--admin-password", password, *(["--keep-admin-password"] if kept else []))
        commands = store_commands(port, provider_port, workers=os.environ.get("WEB_WORKERS"), data=data)
        children = {
            name: subprocess.Popen(cmd, env={**os.environ, **env}, cwd=ROOT, start_new_session=True)
            for name, cmd in commands.items()
        }
        say(f"store:  http://127.0.0.1:{port}/")
        say(
            f"admin:  http://127.0.0.1:{port}/admin/  user: admin  password: {password}"
            f" (kept in {data / 'admin-password'}; one you set in the admin replaces it)"
        )
        say(f"payment provider (simulated): http://127.0.0.1:{provider_port}/")
        say("Ctrl-C stops everything")
        try:
            # Any part gone (a crash, or a signal meant for the store that reached one server) stops
            # the store: a store without its Redis or PostgreSQL only logs tracebacks.
            while all(child.poll() is None for child in children.values()) and not found.dead():
                time.sleep(0.5)
            failed = [name for name, child in children.items() if child.poll() is not None]
            failed += [f"embedded {name}" for name in found.dead()]
            say(f"{', '.join(failed)} exited; stopping the rest")
        except KeyboardInterrupt:
            say("stopping")
        finally:
            stop(children)


def admin_password(path: Path) -> tuple[str, bool]:
    """The admin password of this checkout: made once, kept in .data (only its owner may read
    it), so a restart neither changes it nor hides it. True when it was there already."""
    if path.exists():
        return path.read_text().strip(), True
    password = secrets.token_urlsafe(12)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    path.write_text(password + "\n")
    return password, False


def stop(children: dict[str, subprocess.Popen[bytes]]) -> None:
    for child in children.values():
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for name, child in children.items():
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            say(f"{name} did not stop in time; killing it")
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


# The full suite runs as two pytest sessions at once, each with embedded servers, a test database
# and a data folder of its own. These files spend much of their time waiting (on docker builds,
# elections, failovers, the processes they start), so the other session has the second core
# meanwhile; they are about half the suite's time (`--durations` of a full run: compose up 6 min,
# benchmarks, partitions, faults 3 min each, the image 2). They share one session because the
# first four share the machine's dockerd, namespaces, routes and Patroni's venv.
BESIDE = (
    "tests/test_compose_up.py",
    "tests/test_partitions.py",
    "tests/test_faults.py",
    "tests/test_failover.py",
    "tests/test_image.py",
    "tests/test_compose.py",
    "tests/test_sentinel.py",
    "tests/test_bench.py",
    "tests/ops/test_duties.py",
    "tests/admission/test_close_on_time.py",
)
# --fast in two sessions too: the folders of the races with thousands of threads beside the rest.
BESIDE_FAST = ("tests/holds", "tests/sale", "tests/inventory", "tests/ops", "tests/accounts")


def run_tests(args: list[str]) -> int:
    """`test [--fast] [pytest args]`: ruff, the layers, the types and the suite; any failing fails
    the run. --fast is the developer's loop: the tests that need only PostgreSQL and Redis (no
    browser, no servers of their own: tests/conftest.py, "tiers"), without mypy. The full suite
    with no tests named runs as two sessions at once (BESIDE, BESIDE_FAST)."""
    fast = "--fast" in args
    args = [arg for arg in args if arg != "--fast"]
    # The house style (ruff's rules and format in pyproject.toml), then the layering (import-linter's
    # contracts): a lint finding, an upward import or a cycle fails the run like a failing test.
    linted = subprocess.run([str(BIN / "ruff"), "check", "--quiet", "."], cwd=ROOT).returncode
    formatted = subprocess.run([str(BIN / "ruff"), "format", "--check", "--quiet", "."], cwd=ROOT)
    layers = subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=ROOT).returncode
    style = linted or formatted.returncode or layers
    named = any(Path(arg.split("::")[0]).exists() for arg in args if not arg.startswith("-"))
    # Two sessions need two sets of servers: not when DATABASE_URL and REDIS_URL name the one set.
    # Coverage is one session's: two would each report half and write over each other's data.
    covered = any(arg.startswith("--cov") for arg in args)
    split = not named and not covered and not os.environ.get("DATABASE_URL")
    beside_files = BESIDE_FAST if fast else BESIDE
    tier = ["-m", "not browser and not servers and not slow"] if fast else []
    sessions = (
        [[*tier, *args, *(f"--ignore={name}" for name in beside_files)], [*tier, *args, *beside_files]]
        if split
        else [[*tier, *args]]
    )
    # Servers of their own per session: two test runs at once must not share a test database.
    data_dirs = [ROOT / ".data" / f"test-run-{os.getpid()}-{n}" for n in range(len(sessions))]
    try:
        with contextlib.ExitStack() as started:
            envs = [started.enter_context(servers(data_dir)) for data_dir in data_dirs]
            for n, env in enumerate(envs):
                env["DB_POOL_MAX_SIZE"] = os.environ.get("DB_POOL_MAX_SIZE", "60")
                env["FAST_PASSWORD_HASHING"] = "1"  # config/settings.py: MD5 first, for the suite only
                env["FLOODGATE_TIER"] = "fast" if fast else "full"
                env["FLOODGATE_TEST_DATA"] = "test" if n == 0 else f"test-{n}"  # tests/conftest.py
            typed = 0
            if not fast:
                # The types next ([tool.mypy]: strict on the store, relaxed on tooling and tests); its
                # Django plugin imports the settings, so it runs with the suite's environment.
                mypy = subprocess.run([str(BIN / "mypy")], env={**os.environ, **envs[0]}, cwd=ROOT)
                typed = mypy.returncode
            log = data_dirs[-1] / "pytest.log"
            beside: subprocess.Popen[bytes] | None = None
            if split:
                say(f"two sessions at once; the output of the second ({len(beside_files)} paths) follows")
                with open(log, "wb") as out:
                    beside = subprocess.Popen(
                        [sys.executable, "-m", "pytest", *sessions[1]],
                        env={**os.environ, **envs[1]},
                        cwd=ROOT,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                # Registered after the servers, so it runs before they stop: the second session
                # ends (its teardown stopping what its tests started) while its database is there.
                started.callback(end, beside)
            # pytest's exit 5 (no tests ran) fails the run like any failure.
            done = subprocess.run(
                [sys.executable, "-m", "pytest", *sessions[0]], env={**os.environ, **envs[0]}, cwd=ROOT
            )
            failed = done.returncode
            if beside is not None:
                if beside.poll() is None:
                    say("the first session ended; waiting for the second")
                beside_failed = beside.wait()  # always waited for: its tests' servers stop first
                failed = failed or beside_failed
                say(f"the second session ({' '.join(beside_files)}):")
                sys.stdout.write(log.read_text(errors="replace"))
                sys.stdout.flush()
            return failed or style or typed
    finally:
        for data_dir in data_dirs:
            shutil.rmtree(data_dir, ignore_errors=True)


def end(session: subprocess.Popen[bytes]) -> None:
    """An interrupted run's second session: Ctrl-C reached it already; SIGTERM (main) reached only
    this process. pytest's own teardown, on SIGINT, stops what its tests started."""
    for signum, seconds in ((None, 5), (signal.SIGINT, 60), (signal.SIGKILL, None)):
        if session.poll() is not None:
            return
        if signum is not None:
            session.send_signal(signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            session.wait(seconds)


def run_shots(args: list[str]) -> int:
    """`shots [FOLDER] [--lang CODE]`: the real store on servers of its own, walked by Chromium
    (devtools/shots.py); with --lang, by a browser in that language (into shots-CODE/ by default)."""
    lang = ""
    if "--lang" in args:
        at = args.index("--lang")
        if at + 1 >= len(args) or not args[at + 1].replace("-", "").isalpha():
            sys.exit("usage: python3 floodgate.py shots [folder] [--lang de]")
        lang = args[at + 1]
        args = args[:at] + args[at + 2 :]
    out = (Path(args[0]) if args else ROOT / (f"shots-{lang}" if lang else "shots")).resolve()
    data = ROOT / ".data" / f"shots-{os.getpid()}"
    try:
        with servers(data) as env:
            say("migrating a fresh database for the screenshots")
            manage(env, "migrate", "--no-input", "-v", "0")
            port, provider_port = str(free_port()), str(free_port())
            env |= {
                "DEBUG": "0",  # the shop's own 404, as `run` serves it
                "PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
                "PAYMENT_PROVIDER_URL": f"http://127.0.0.1:{provider_port}",
                "PROVIDER_PUBLIC_URL": f"http://127.0.0.1:{provider_port}",
            }
            logs = data / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            children = {}
            for name, command in store_commands(port, provider_port, workers="1", data=data).items():
                with open(logs / f"{name}.log", "wb") as log:
                    children[name] = subprocess.Popen(
                        command,
                        env={**os.environ, **env},
                        cwd=ROOT,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            say(f"store on :{port}, provider on :{provider_port} (logs in {logs.relative_to(ROOT)}/)")
            try:
                for each in (port, provider_port):
                    wait_for_port(
                        each, seconds=60, failed=functools.partial("nothing answers on port {}".format, each)
                    )
                base, provider = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{provider_port}"
                command = [sys.executable, "-m", "devtools.shots", "--base", base, "--provider", provider]
                if lang:
                    command += ["--lang", lang]
                done = subprocess.run([*command, "--out", str(out)], env={**os.environ, **env}, cwd=ROOT)
                return done.returncode
            finally:
                stop(children)
    finally:
        shutil.rmtree(data, ignore_errors=True)


def run_bench(args: list[str]) -> int:
    """`bench NAME [args]`: run `python -m bench.NAME` against servers of its own (.data/bench)."""
    if not args or not args[0].isidentifier():
        sys.exit("usage: python3 floodgate.py bench <name> [args], e.g. bench claims --quick")
    name, rest = args[0], args[1:]
    if name == "crowd" and "--sweep" in rest:  # the cost-growth sweep: its own flags, its own module
        name, rest = "sweep", [arg for arg in rest if arg != "--sweep"]
    with servers(ROOT / ".data" / "bench") as env:
        manage(env, "migrate", "--no-input", "-v", "0")
        done = subprocess.run(
            [sys.executable, "-m", f"bench.{name}", *rest], env={**os.environ, **env}, cwd=ROOT
        )
        return done.returncode


def run_proof(args: list[str]) -> int:
    """`prove NAME [args]`: a fault run that starts its own servers (devtools/NAME.py)."""
    if args[:1] not in (["failover"], ["faults"], ["partitions"], ["compose"]):
        sys.exit(
            "usage: python3 floodgate.py prove failover [--patroni] [--before S] [--after S]"
            " | prove faults [--only NAME] [--chaos] [--every-fault] [--buyers N] [--units N]"
            " | prove partitions [--only NAME] [--buyers N] [--units N]"
            " | prove compose [--buyers N] [--units N]"
        )
    return subprocess.run([sys.executable, "-m", f"devtools.{args[0]}", *args[1:]], cwd=ROOT).returncode


def run_rehearsal(args: list[str]) -> int:
    """`rehearse SLUG [--buyers N] [--base URL]`: a crowd against the running store's copy of a drop
    (devtools/rehearse.py), on the database `run` uses (.data, or DATABASE_URL/REDIS_URL)."""
    rehearse.parse(args)  # garbage is refused before any server starts
    with servers(ROOT / ".data") as env:
        command = [sys.executable, "-m", "devtools.rehearse", *args]
        return subprocess.run(command, env={**os.environ, **env}, cwd=ROOT).returncode


def main(argv: list[str]) -> None:
    # SIGTERM, SIGHUP (the terminal closed) and SIGINT stop the command and what it started, even
    # when it was started with SIGINT ignored (a shell's background job): Python then installs no
    # handler of its own, and a group's Ctrl-C would stop only the embedded Redis.
    for stopping in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(stopping, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    command, rest = argv[0], argv[1:]
    if command == "run":
        run_store()
    elif command == "test":
        sys.exit(run_tests(rest))
    elif command == "bench":
        sys.exit(run_bench(rest))
    elif command == "shots":
        sys.exit(run_shots(rest))
    elif command == "prove":
        sys.exit(run_proof(rest))
    elif command == "rehearse":
        sys.exit(run_rehearsal(rest))
    elif command == "manage":
        with servers(ROOT / ".data") as env:
            try:
                manage(env, *rest)
            except subprocess.CalledProcessError as failed:  # the command said why; pass on its code
                sys.exit(failed.returncode)
    else:
        sys.exit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
