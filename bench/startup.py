"""Benchmark: how long verl-setup's quick commands take next to a bare interpreter start.

Runs each command several times in a fresh process and prints the median and the spread.
Usage: python bench/startup.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

VERL_SETUP = shutil.which("verl-setup") or str(Path(sys.executable).parent / "verl-setup")

COMMANDS: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "verl-setup --help": [VERL_SETUP, "--help"],
    "verl-setup matrix list": [VERL_SETUP, "matrix", "list"],
    "verl-setup detect --json": [VERL_SETUP, "detect", "--json"],
    "verl-setup plan --json": [VERL_SETUP, "plan", "--json"],
    "verl-setup plan (flags, no detection)": (
        f"{VERL_SETUP} plan --driver 535.129.03 --gpu H100 --python 3.10.12 --json".split()
    ),
}


def measure(argv: list[str], runs: int) -> list[float]:
    """Wall seconds of `runs` fresh runs (after one warm-up for the OS page cache)."""
    subprocess.run(argv, capture_output=True, check=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def report(times: dict[str, list[float]], runs: int, *, as_json: bool, width: int = 40) -> None:
    """One line per measurement (median, min and max in milliseconds), or the same as JSON."""
    results = {
        name: {
            "median_ms": round(statistics.median(t) * 1000, 1),
            "min_ms": round(min(t) * 1000, 1),
            "max_ms": round(max(t) * 1000, 1),
        }
        for name, t in times.items()
    }
    if as_json:
        print(json.dumps({"runs": runs, "results": results}, indent=2))
        return
    print(f"{'command':<{width}} {'median':>9} {'min':>9} {'max':>9}   ({runs} runs each)")
    for name, r in results.items():
        print(f"{name:<{width}} {r['median_ms']:>7.1f}ms {r['min_ms']:>7.1f}ms {r['max_ms']:>7.1f}ms")


def main() -> int:
    """Print one line per command: median, min and max in milliseconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report({name: measure(argv, args.runs) for name, argv in COMMANDS.items()}, args.runs, as_json=args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
