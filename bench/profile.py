"""A sampling profile of the web processes while a crowd runs (`bench crowd --sweep --profile`).

py-spy samples every thread of the web servers and their workers from outside (no code in the
store changes, the production profile runs as it would); what it saw is written as collapsed
stacks (`<stem>.txt`, for any flame-graph tool) and summed here into the functions that took the
most samples, by themselves and with what they called.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.crowd import say, tied

RATE = 200  # samples per second per thread: enough for a 1-3 s rush, little cost to the servers
IDLE = ("select (selectors.py", "epoll", "_worker (concurrent/futures/thread.py", "wait (threading.py")


def available() -> str | None:
    """The py-spy executable beside this interpreter (a dev dependency), or None."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


@dataclass(frozen=True)
class Summary:
    samples: int
    idle: int
    by_itself: list[tuple[str, int]]
    with_callees: list[tuple[str, int]]

    def text(self, top: int = 15) -> str:
        busy = max(1, self.samples - self.idle)
        lines = [
            f"{self.samples:,} samples, {self.idle:,} of them idle (waiting for work);"
            f" shares below are of the {busy:,} busy ones",
            "",
            "by itself:",
            *(f"  {n / busy:6.1%}  {name}" for name, n in self.by_itself[:top]),
            "",
            "with what it called:",
            *(f"  {n / busy:6.1%}  {name}" for name, n in self.with_callees[:top]),
        ]
        return "\n".join(lines)


def summarise(collapsed: str) -> Summary:
    """Sum collapsed stacks (`frame;frame;...;leaf count` per line, root first)."""
    itself: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    samples = idle = 0
    for line in collapsed.splitlines():
        stack, _, number = line.rpartition(" ")
        if not stack or not number.isdigit():
            continue
        n = int(number)
        frames = stack.split(";")
        samples += n
        if any(mark in frames[-1] for mark in IDLE):
            idle += n
            continue
        itself[frames[-1]] += n
        for name in set(frames[1:]):  # the first frame names the process and thread
            inclusive[name] += n
    return Summary(samples, idle, itself.most_common(), inclusive.most_common())


@contextlib.contextmanager
def recording(pids: list[int], stem: Path | None):
    """Sample these processes (and their children) while the block runs; the summary is printed
    and written beside the collapsed stacks. `stem` None: nothing is recorded."""
    spy = available() if stem is not None else None
    if stem is None or spy is None or not pids:
        if stem is not None:
            say("profile: py-spy is not installed (pip install -e '.[dev]'); running unprofiled")
        yield
        return
    raw = [stem.with_name(f"{stem.name}-{pid}.txt") for pid in pids]
    flags = ["--rate", str(RATE), "--format", "raw", "--output"]
    spies = [
        subprocess.Popen(
            tied(
                [
                    spy,
                    "record",
                    "--pid",
                    str(pid),
                    "--subprocesses",
                    "--threads",
                    "--nonblocking",
                    *flags,
                    str(path),
                ]
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        for pid, path in zip(pids, raw, strict=True)
    ]
    try:
        yield
    finally:
        for s in spies:
            with contextlib.suppress(ProcessLookupError):
                s.send_signal(signal.SIGINT)  # py-spy writes what it has and exits
        for s in spies:
            try:
                s.wait(30)
            except subprocess.TimeoutExpired:
                s.kill()
                s.wait(5)
    collapsed = "".join(path.read_text() for path in raw if path.exists())
    if not collapsed:
        errors = b" ".join((s.stderr.read() if s.stderr else b"") for s in spies).decode(errors="replace")
        say(f"profile: py-spy recorded nothing ({errors.strip()[:300] or 'no output'})")
        return
    stem.with_suffix(".txt").write_text(collapsed)
    for path in raw:
        path.unlink(missing_ok=True)
    summary = summarise(collapsed).text()
    stem.with_suffix(".profile.md").write_text(summary + "\n")
    say(f"profile: {stem.with_suffix('.txt')} (collapsed stacks)\n{summary}")
