"""Benchmark: how long verl-setup's quick commands take next to a bare interpreter start.

Runs each command several times in a fresh process and prints the median wall time, the median
CPU time (user + system, the child's own programs included) and both as a ratio to `python -c
pass`. With `--against REV` the same commands of that commit (its installer/, matrices/ and
templates/, from `git archive`) run in turn with this tree's, under the same interpreter, so a
busy machine slows both sides alike.

Usage: python bench/startup.py [--runs N] [--json] [--against REV]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = "import sys; from verl_setup.cli import main; sys.exit(main())"  # what the console script runs

COMMANDS: dict[str, list[str]] = {
    "verl-setup --help": ["--help"],
    "verl-setup matrix list": ["matrix", "list"],
    "verl-setup detect --json": ["detect", "--json"],
    "verl-setup plan --json": ["plan", "--json"],
    "verl-setup plan (flags, no detection)": [
        *("plan", "--driver", "535.129.03", "--gpu", "H100", "--python", "3.10.12", "--json"),
    ],
}
BARE = "python -c pass"


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def tree_env(installer: Path) -> dict[str, str]:
    """This interpreter, importing verl_setup from `installer` (ahead of any installed copy), with
    bytecode written and used as an installed wheel has it (PYTHONDONTWRITEBYTECODE dropped)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(installer)}


def export(rev: str, into: Path) -> Path:
    """installer/, matrices/ and templates/ of `rev`, unpacked below `into`."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "installer", "matrices", "templates"],
        capture_output=True,
        check=True,
    ).stdout
    tar = into / "tree.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    return into / "installer"


def measure(sides: dict[str, dict[str, str]], runs: int) -> dict[str, dict[str, dict[str, float]]]:
    """Every command on every side, interleaved run by run, after one warm-up each; `python -c
    pass` runs in every round too (it does not depend on the tree), and every ratio is to it."""
    plan = [(BARE, "python", [sys.executable, "-c", "pass"], next(iter(sides.values())))]
    for name, args in COMMANDS.items():
        plan += [(name, side, [sys.executable, "-c", LAUNCH, *args], env) for side, env in sides.items()]
    for _, _, argv, env in plan:  # warm-up: the page cache, and each side's parsed-matrix cache
        subprocess.run(argv, capture_output=True, check=True, env=env)
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {(n, s): [] for n, s, _, _ in plan}
    for _ in range(runs):
        for name, side, argv, env in plan:
            samples[name, side].append(run_once(argv, env))
    out: dict[str, dict[str, dict[str, float]]] = {}
    for (name, side), got in samples.items():
        walls, cpus = [w for w, _ in got], [c for _, c in got]
        out.setdefault(name, {})[side] = {
            "median_ms": round(statistics.median(walls) * 1000, 1),
            "min_ms": round(min(walls) * 1000, 1),
            "cpu_ms": round(statistics.median(cpus) * 1000, 1),
        }
    bare = out[BARE]["python"]
    for by_side in out.values():
        for r in by_side.values():
            r["x_bare"] = round(r["median_ms"] / bare["median_ms"], 2)
            r["cpu_x_bare"] = round(r["cpu_ms"] / bare["cpu_ms"], 2) if bare["cpu_ms"] else 0.0
    return out


def main() -> int:
    """Print one line per command and side: median wall, min, median CPU, and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--against", metavar="REV", help="also run this commit's tree, side by side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="verl-setup-bench-") as tmp:
        sides = {"this tree": tree_env(ROOT / "installer")}
        if args.against:
            sides[args.against] = tree_env(export(args.against, Path(tmp)))
        results = measure(sides, args.runs)
    if args.json:
        print(json.dumps({"runs": args.runs, "load": os.getloadavg(), "results": results}, indent=2))
        return 0
    print(
        f"{args.runs} runs each, interleaved; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"{'command':<40} {'side':<10} {'median':>9} {'min':>9} {'x bare':>7} {'CPU':>9} {'CPU x':>6}")
    for name, by_side in results.items():
        for side, r in by_side.items():
            print(
                f"{name:<40} {side:<10} {r['median_ms']:>7.1f}ms {r['min_ms']:>7.1f}ms {r['x_bare']:>6.2f}x "
                f"{r['cpu_ms']:>7.1f}ms {r['cpu_x_bare']:>5.2f}x"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
