"""Benchmark: what verl-setup adds on top of uv, for install and lock, with a warm uv cache.

Compares `verl-setup install` of the planned row (the `cpu` row on a machine without a GPU)
with raw `uv venv` + `uv pip install` of the same set (the row's pins with its closure as
constraints) into the same interpreter, and `verl-setup lock` with raw `uv pip compile
--generate-hashes` of the same inputs. Runs alternate (in reversed order every other round),
after one warm-up of each (which fills uv's cache), each into a prefix that does not exist yet.
With --probe: the import probe against the slowest of its modules imported alone, each in a
fresh interpreter of the installed environment. Needs the package index.

Usage: python bench/install.py [--runs N] [--json] [--with-import] [--probe [--probe-runs N]] [--shards N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from verl_setup.environment.python_choice import choose_python
from verl_setup.environment.uv import compile_command, install_command, venv_command, write_inputs
from verl_setup.host.pythons import detect_pythons
from verl_setup.plan.make import PlanInputs, make_plan
from verl_setup.util.uvbin import find_uv

VERL_SETUP = [sys.executable, "-m", "verl_setup"]
ENV = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}


def sh(argv: list[str], cwd: Path | None = None) -> None:
    """Run one command; a failure stops the benchmark."""
    done = subprocess.run(argv, capture_output=True, text=True, env=ENV, cwd=cwd, check=False, timeout=3600)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{done.stderr[-2000:]}")


def timed(action: Callable[[], None]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


PREFIXES = {
    "uv venv + uv pip install (raw)": "raw",
    "verl-setup install --no-import": "ours",
    "verl-setup install (with import verl)": "ours-import",
}


def fresh(work: Path, variant: str) -> None:
    """Each install starts from no environment: removing the last one (seconds of rmdir for a
    torch env on a slow disk) is the same work for either and is left out of their times."""
    if variant in PREFIXES:
        shutil.rmtree(work / PREFIXES[variant], ignore_errors=True)
        subprocess.run(["sync"], check=False)


def _rounds(variants: dict[str, Callable[[], None]], work: Path, runs: int) -> dict[str, list[float]]:
    """Seconds per variant per round; every other round in reverse, so that no variant always
    runs right after the same one (a page cache or a disk still writing favours the second)."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for run in range(runs):
        order = list(variants.items())
        for name, action in order[::-1] if run % 2 else order:
            fresh(work, name)
            times[name].append(timed(action))
    return times


def main() -> int:
    """Print median, min and max seconds per variant, and verl-setup's overhead."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--with-import", action="store_true", help="also time install with `import verl`")
    parser.add_argument("--probe", action="store_true", help="the import probe against its slowest module")
    parser.add_argument("--shards", type=int, default=None, help="import probe processes (default: its own)")
    parser.add_argument("--probe-runs", type=int, default=None, help="probe rounds (default: --runs)")
    args = parser.parse_args()

    plan = make_plan(PlanInputs(), ENV)
    uv = find_uv()
    pythons = detect_pythons(ENV.get("PATH", ""), Path.home(), ENV)
    interpreter = choose_python(plan.python, pythons, downloads=False).request
    work = Path(tempfile.mkdtemp(prefix="verl-setup-bench-"))  # same filesystem as uv's cache, usually
    inputs = work / "inputs"
    requirements, overrides = write_inputs(plan.row, inputs, constraints=plan.closure.constraints())
    constraints = inputs / "constraints.txt" if plan.closure.pins else None

    def ours(name: str, *extra: str) -> Callable[[], None]:
        return lambda: sh([*VERL_SETUP, "install", "--prefix", str(work / name), *extra])

    def raw(name: str) -> Callable[[], None]:
        venv = work / name

        def run() -> None:
            sh(venv_command(uv, path=venv, python=interpreter))
            argv = install_command(uv, python_exe=venv / "bin" / "python", requirements=requirements,
                                   overrides=overrides, index_url=plan.index_url,
                                   sdists=plan.matrix.rows_file.built_from_sdist(plan.row))  # fmt: skip
            sh(argv + (["--constraint", str(constraints)] if constraints else []))

        return run

    lock_argv = compile_command(
        uv,
        row=plan.row,
        matrix=plan.matrix,
        python=plan.python,
        requirements=Path("requirements.in"),
        overrides=None if overrides is None else Path(overrides.name),
        hashes=True,
    )
    variants: dict[str, Callable[[], None]] = {
        "uv venv + uv pip install (raw)": raw(PREFIXES["uv venv + uv pip install (raw)"]),
        "verl-setup install --no-import": ours(PREFIXES["verl-setup install --no-import"], "--no-import"),
        "uv pip compile --generate-hashes (raw)": lambda: sh(lock_argv, cwd=inputs),
        "verl-setup lock": lambda: sh([*VERL_SETUP, "lock", "--out", str(work / "verl.lock")]),
    }
    if args.with_import:
        with_import = "verl-setup install (with import verl)"
        variants[with_import] = ours(PREFIXES[with_import])
    try:
        for action in variants.values():  # warm-up: fills uv's cache, first install into each prefix
            action()
        times = _rounds(variants, work, args.runs)
        probe = _probe(work / "ours", args.shards, args.probe_runs or args.runs) if args.probe else None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _report(
        times,
        probe,
        as_json=args.json,
        head=f"row {plan.row.id}, Python {interpreter}, {args.runs} runs each",
    )
    return 0


RAW, OURS = "uv venv + uv pip install (raw)", "verl-setup install --no-import"


def _report(
    times: dict[str, list[float]], probe: dict[str, object] | None, *, as_json: bool, head: str
) -> None:
    """Median, min and max per variant, the overhead, and the install ratio two ways."""
    stats = {
        name: {
            "median_s": round(statistics.median(t), 2),
            "min_s": round(min(t), 2),
            "max_s": round(max(t), 2),
        }
        for name, t in times.items()
    }
    median = {name: s["median_s"] for name, s in stats.items()}
    overhead = {
        "install": round(median[OURS] - median[RAW], 2),
        "lock": round(median["verl-setup lock"] - median["uv pip compile --generate-hashes (raw)"], 2),
    }
    ratio = round(median[OURS] / median[RAW], 2)
    # The same round's two installs, one right after the other: the disk's slow and fast spells
    # (seconds of journal writes after 35k hard links) hit both, so their ratio varies less.
    paired = sorted(o / r for o, r in zip(times[OURS], times[RAW], strict=True))
    if as_json:
        doc = {"results": stats, "overhead_s": overhead, "install_ratio": ratio, "probe": probe}
        doc["rounds_s"] = {name: [round(x, 2) for x in t] for name, t in times.items()}
        doc["paired_ratio"] = {"median": round(statistics.median(paired), 3), "min": round(paired[0], 3),
                               "max": round(paired[-1], 3)}  # fmt: skip
        print(json.dumps({"bench": head, **doc}, indent=2))
        return
    print(f"{head} (warm uv cache)")
    for name, s in stats.items():
        print(f"{name:<40} {s['median_s']:>7.2f}s  (min {s['min_s']:.2f}s, max {s['max_s']:.2f}s)")
    print(f"verl-setup overhead (median): install {overhead['install']:+.2f}s, lock {overhead['lock']:+.2f}s")
    print(f"install --no-import / raw uv on the same set: {ratio:.2f}x (medians)")
    print(
        f"  per round, each pair run back to back: median {statistics.median(paired):.2f}x"
        f" (min {paired[0]:.2f}x, max {paired[-1]:.2f}x)"
    )
    if probe is not None:
        print(
            f"import probe {probe['probe_s']:.2f}s ({probe['shards']} shard(s)); slowest single import "
            f"{probe['slowest']} {probe['slowest_s']:.2f}s: {probe['ratio']:.2f}x"
        )


def _probe(prefix: Path, shards: int | None, runs: int) -> dict[str, object]:
    """Median probe time and median import time of its slowest module alone (fresh interpreters)."""
    from verl_setup.environment.import_probe import run_probe  # noqa: PLC0415

    python = prefix / "bin" / "python"
    first = run_probe(python, "none", 900, ENV, shards=shards)
    modules = [m.module for m in first.modules if m.outcome == "ok" and " -> " not in m.module]

    def alone(module: str) -> float:
        return timed(lambda: sh([str(python), "-c", f"import {module}"]))

    singles = {m: statistics.median(alone(m) for _ in range(runs)) for m in modules}
    slowest = max(singles, key=lambda m: singles[m])
    probe_s = statistics.median(
        run_probe(python, "none", 900, ENV, shards=shards).seconds for _ in range(runs)
    )
    return {
        "probe_s": round(probe_s, 2),
        "shards": shards or "default",
        "slowest": slowest,
        "slowest_s": round(singles[slowest], 2),
        "ratio": round(probe_s / singles[slowest], 2),
        "singles_s": {m: round(t, 2) for m, t in singles.items()},
    }


if __name__ == "__main__":
    raise SystemExit(main())
