"""Benchmark: `plan --cluster` over a recorded 64-node cluster file (tests/fixtures/cluster).

Prints the whole command's wall time in a fresh process (median of N) and, in this process, the
time to read the file and plan (median of N), next to a one-host `plan --host` for scale.
Usage: python bench/cluster.py [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from verl_setup.host.cluster_file import load_cluster
from verl_setup.matrix.load import load_matrix
from verl_setup.plan.cluster import plan_cluster
from verl_setup.plan.request import Request

CLUSTER = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "cluster" / "nodes-64.json"
VERL_SETUP = shutil.which("verl-setup") or str(Path(sys.executable).parent / "verl-setup")


def measure(argv: list[str], runs: int) -> list[float]:
    """Wall seconds of `runs` fresh runs (after one warm-up for the page cache)."""
    subprocess.run(argv, capture_output=True, check=True)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return times


def in_process(runs: int) -> list[float]:
    """Seconds to load the cluster file and plan it (matrix loaded once, as the CLI does once)."""
    matrix = load_matrix()
    times = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        plan_cluster(load_cluster(CLUSTER), Request(), matrix, {})
        times.append(time.perf_counter() - start)
    return times[1:]  # the first run warms the page cache and the matrix's proof cache


def main() -> int:
    """One line per measurement: median, min and max in milliseconds."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    nodes = len(json.loads(CLUSTER.read_text())["nodes"])
    results = {
        f"verl-setup plan --cluster ({nodes} nodes)": measure(
            [VERL_SETUP, "plan", "--cluster", str(CLUSTER), "--json"], args.runs
        ),
        f"load + plan_cluster in process ({nodes} nodes)": in_process(args.runs),
        "verl-setup plan (flags, no detection)": measure(
            f"{VERL_SETUP} plan --driver 535.129.03 --gpu H100 --python 3.10.12 --json".split(), args.runs
        ),
    }
    summary = {
        name: {"median_ms": round(statistics.median(t) * 1000, 1), "min_ms": round(min(t) * 1000, 1)}
        for name, t in results.items()
    }
    if args.json:
        print(json.dumps({"runs": args.runs, "load": os.getloadavg(), "results": summary}, indent=2))
        return 0
    print(f"{args.runs} runs each; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, r in summary.items():
        print(f"{name:<48} {r['median_ms']:>8.1f}ms median {r['min_ms']:>8.1f}ms min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
