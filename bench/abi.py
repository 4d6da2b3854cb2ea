"""Benchmark: the ABI check on a real environment (a venv's interpreter or a site-packages folder).

Reports the extensions read, the findings, and the wall and CPU seconds of each run: the first run
reads the files from disk, later ones from the page cache.

Usage: python bench/abi.py PATH [--runs N] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from verl_setup.environment.abi import check_environment


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("target", type=Path, help="an environment's python, or its site-packages")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = []
    for _ in range(args.runs):
        wall, cpu = time.perf_counter(), time.process_time()
        report = check_environment(args.target)
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    result = {
        "target": str(args.target),
        "extensions": len(report.checked),
        "findings": len(report.findings),
        "wall_s": [round(w, 3) for w, _ in runs],
        "cpu_s": [round(c, 3) for _, c in runs],
        "median_wall_s": round(statistics.median(w for w, _ in runs), 3),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{result['extensions']} extensions, {result['findings']} findings; wall {result['wall_s']} s, "
            f"cpu {result['cpu_s']} s (median wall {result['median_wall_s']} s)"
        )


if __name__ == "__main__":
    main()
