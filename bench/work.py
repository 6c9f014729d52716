"""bench work: what the join's proof of work costs a buyer's browser, a bot and the server.

    python3 floodgate.py bench work              # 12 joins per cell
    python3 floodgate.py bench work --joins 30

For each difficulty, the same fresh challenges (admission.work.issue) solved by:

- the page: Debian's Chromium (Playwright, headless) running static/js/work.js as the drop page
  does, in its Web Worker; a join's time is from the script's start to the proof in the form;
- a Python bot: admission.work.solve, hashlib on one core;
- a C bot: OpenSSL's SHA-256 in a loop on one core, compiled here with gcc (what a bot farm
  would run per core; a GPU is faster still).

Every nonce found is checked with admission.work.solves. The time to solve is random (each
hash is a lottery ticket), so beside the median and the mean of the joins the table gives each
solver's hash rate (nonces tried / time) and the expected time per join it implies, 2**bits /
rate: the figure the default is chosen by. Goal: the page's expected time at the default
difficulty within 0.5-2 s (PASS/MISS). A solver that cannot run or finds a wrong nonce is a
FAILED run (exit 2), never a blank cell.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK_JS = ROOT / "static" / "js" / "work.js"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"]
GOAL = (0.5, 2.0)  # seconds the page's expected time per join at the default should fall in

C_SOLVER = r"""
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Count hex nonces up from 0 until sha256("<challenge>:<nonce>") starts with `bits` zero bits. */
static int zero_bits(const unsigned char *d) {
    int bits = 0;
    for (int i = 0; i < 32; i++) {
        if (d[i] == 0) { bits += 8; continue; }
        return bits + __builtin_clz((unsigned)d[i]) - 24;
    }
    return bits;
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    const char *challenge = argv[1];
    int want = atoi(argv[2]);
    char text[256];
    unsigned char digest[32];
    size_t head = (size_t)snprintf(text, sizeof text, "%s:", challenge);
    for (unsigned long long n = 0;; n++) {
        int len = snprintf(text + head, sizeof text - head, "%llx", n);
        SHA256((const unsigned char *)text, head + (size_t)len, digest);
        if (zero_bits(digest) >= want) { printf("%llx\n", n); return 0; }
    }
}
"""


@dataclass
class Cell:
    solver: str
    bits: int
    seconds: list[float] = field(default_factory=list)
    hashes: int = 0
    failed: str = ""

    def add(self, challenge: str, nonce: str, seconds: float, solves: object) -> None:
        if not solves(challenge, nonce, self.bits):  # type: ignore[operator]
            self.failed = f"{self.solver}: nonce {nonce!r} does not solve {challenge} at {self.bits} bits"
        self.seconds.append(seconds)
        self.hashes += int(nonce, 16) + 1

    @property
    def rate(self) -> float:
        return self.hashes / sum(self.seconds) if self.seconds and sum(self.seconds) > 0 else 0.0

    @property
    def expected(self) -> float:
        return 2**self.bits / self.rate if self.rate else float("nan")


def chromium_path() -> str:
    return os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"


def browser_cells(challenges: dict[int, list[str]], solves: object) -> list[Cell]:
    from playwright.sync_api import sync_playwright

    script = WORK_JS.read_text()
    cells = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS
        )
        page = browser.new_page()
        for bits, asked in challenges.items():
            cell = Cell("the page: Chromium, Web Worker (static/js/work.js)", bits)
            for challenge in asked:
                # the markup templates/admission/join_button.html renders for a drop asking work
                page.set_content(
                    f'<form class="join" data-work-bits="{bits}" data-work-challenge="{challenge}">'
                    '<input type="hidden" name="proof" value=""><button type="submit">Join</button></form>'
                )
                began = time.perf_counter()
                page.add_script_tag(content=script)
                page.wait_for_function(
                    "() => document.querySelector('form.join input[name=proof]').value !== ''",
                    timeout=300_000,
                    polling=2,
                )
                seconds = time.perf_counter() - began
                cell.add(challenge, page.input_value("form.join input[name=proof]"), seconds, solves)
            cells.append(cell)
            print(f"bench work: the page, {bits} bits done", file=sys.stderr, flush=True)
        browser.close()
    return cells


def python_cells(challenges: dict[int, list[str]], work: object) -> list[Cell]:
    cells = []
    for bits, asked in challenges.items():
        cell = Cell("a Python bot: hashlib, one core", bits)
        for challenge in asked:
            began = time.perf_counter()
            nonce = work.solve(challenge, bits)  # type: ignore[attr-defined]
            cell.add(challenge, nonce, time.perf_counter() - began, work.solves)  # type: ignore[attr-defined]
        cells.append(cell)
        print(f"bench work: Python bot, {bits} bits done", file=sys.stderr, flush=True)
    return cells


def c_cells(challenges: dict[int, list[str]], solves: object, folder: Path) -> list[Cell]:
    source, binary = folder / "solver.c", folder / "solver"
    source.write_text(C_SOLVER)
    built = subprocess.run(
        ["gcc", "-O2", "-o", str(binary), str(source), "-lcrypto"],
        capture_output=True,
        text=True,
        check=False,
    )
    if built.returncode != 0:
        return [
            Cell("a C bot: OpenSSL SHA-256, one core", 0, failed=f"C bot: gcc: {built.stderr.strip()[:300]}")
        ]
    cells = []
    for bits, asked in challenges.items():
        cell = Cell("a C bot: OpenSSL SHA-256, one core", bits)
        for challenge in asked:
            began = time.perf_counter()
            done = subprocess.run(
                [str(binary), challenge, str(bits)], capture_output=True, text=True, check=False
            )
            seconds = time.perf_counter() - began
            cell.add(challenge, done.stdout.strip() or "0", seconds, solves)
        cells.append(cell)
        print(f"bench work: C bot, {bits} bits done", file=sys.stderr, flush=True)
    return cells


def report(cells: list[Cell], default: int, check_us: float) -> tuple[str, str]:
    rows = [
        "| solver | bits | joins | median s/join | mean s/join | hashes/s | expected s/join (2^bits/rate) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for cell in sorted(cells, key=lambda c: (c.bits, c.solver)):
        mark = " (default)" if cell.bits == default else ""
        rows.append(
            f"| {cell.solver} | {cell.bits}{mark} | {len(cell.seconds)} "
            f"| {statistics.median(cell.seconds):.3f} | {statistics.fmean(cell.seconds):.3f} "
            f"| {cell.rate:,.0f} | {cell.expected:.3f} |"
        )
    rows.append(f"\nServer: checking one proof (an HMAC and a hash) takes {check_us:.1f} µs.")
    page = next(c for c in cells if c.bits == default and c.solver.startswith("the page"))
    low, high = GOAL
    verdict = "PASS" if low <= page.expected <= high else "MISS"
    bots = [c for c in cells if c.bits == default and "bot" in c.solver]
    side = "; ".join(
        f"{c.solver}: {c.expected:.3f} s ({c.expected / page.expected:.2f}x the page's)" for c in bots
    )
    line = (
        f"default {default} bits: the page {page.expected:.2f} s expected per join (goal {low}-{high} s): "
        f"{verdict}; {side}"
    )
    rows.append(line)
    return "\n".join(rows), verdict


def main() -> None:
    parser = argparse.ArgumentParser(prog="bench work")
    parser.add_argument("--joins", type=int, default=12, help="joins solved per solver and difficulty")
    parser.add_argument(
        "--bits", default="", help="difficulties, comma-separated (default: around the default)"
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("FLOODGATE_PROFILE", "dev")
    import django

    django.setup()
    from django.utils import timezone

    from admission import work
    from shop.models import DEFAULT_JOIN_WORK_BITS, Drop

    default = DEFAULT_JOIN_WORK_BITS
    levels = [int(b) for b in args.bits.split(",") if b] or [default - 3, default - 1, default, default + 1]
    if default not in levels:
        levels.append(default)
    drop = Drop(pk=1, starts_at=timezone.now(), join_work_bits=0)
    challenges = {
        bits: [work.issue(drop=drop, buyer_id=bits * 1000 + i).text for i in range(args.joins)]
        for bits in levels
    }
    check = timeit.timeit(lambda: work.solves(challenges[default][0], "1f2e3d", default), number=20_000)

    failures: list[str] = []
    cells: list[Cell] = []
    if not os.path.exists(chromium_path()):
        failures.append(
            f"the page: Chromium is missing at {chromium_path()} (Debian's chromium, or CHROMIUM_PATH)"
        )
    else:
        cells += browser_cells(challenges, work.solves)
    cells += python_cells(challenges, work)
    with tempfile.TemporaryDirectory() as folder:
        cells += c_cells(challenges, work.solves, Path(folder))
    failures += [c.failed for c in cells if c.failed]
    if failures:
        print(f"bench work: FAILED: {'; '.join(failures)}", file=sys.stderr)
        sys.exit(2)
    text, _ = report(cells, default, check / 20_000 * 1e6)
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"work-{time.strftime('%Y-%m-%d-%H%M%S')}.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
