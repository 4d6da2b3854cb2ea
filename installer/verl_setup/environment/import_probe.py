"""Import what a training run of the installed verl imports, in a child process with a timeout.

The module list is derived from the installed verl (which worker, rollout and checkpoint-engine
modules its version has), not written per version. Each failure is reported as the module, then
the missing or broken distribution. Imports that can only succeed with an NVIDIA driver present
(sgl_kernel loads libcuda.so.1, for example) are reported as `gpu`, not as failures.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from verl_setup.host.resources import online_cpus
from verl_setup.scripts import script_path
from verl_setup.util.runner import ProgramError, stream

Outcome = Literal["ok", "failed", "gpu", "absent", "known"]


@dataclass(frozen=True, kw_only=True)
class ModuleResult:
    """One module: ok, failed (with the error and the distribution at fault), or needs a GPU."""

    module: str
    outcome: Outcome
    seconds: float = 0.0
    error: str = ""
    missing: str | None = None
    distribution: str | None = None

    def line(self) -> str:
        """One line for the report."""
        if self.outcome == "ok":
            return f"  ok      {self.module} ({self.seconds:.1f}s)"
        if self.outcome == "gpu":
            return f"  gpu     {self.module}: needs an NVIDIA driver to import ({self.error})"
        if self.outcome == "absent":
            return f"  absent  {self.module}: {self.error}"
        if self.outcome == "known":
            return f"  known   {self.module}: {self.error}"
        if self.missing:
            owner = f" (distribution {self.distribution})" if self.distribution else " (not installed)"
            return f"  FAILED  {self.module}: missing module {self.missing}{owner}: {self.error}"
        return f"  FAILED  {self.module}: {self.error}"


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """Every module's outcome, and whether the probe finished in time."""

    modules: tuple[ModuleResult, ...]
    seconds: float
    timed_out_in: str | None = None
    crashed: str | None = None

    @property
    def ok(self) -> bool:
        """Nothing failed (modules that need a GPU do not count against it)."""
        return self.timed_out_in is None and self.crashed is None and not self.failures()

    def failures(self) -> list[ModuleResult]:
        """The modules that failed for a reason other than a missing GPU."""
        return [m for m in self.modules if m.outcome == "failed"]

    def summary(self) -> str:
        """One line: counts, and the first failure."""
        counts = {
            k: sum(1 for m in self.modules if m.outcome == k)
            for k in ("ok", "gpu", "failed", "absent", "known")
        }
        text = f"{counts['ok']} imported, {counts['gpu']} need a GPU, {counts['failed']} failed"
        if counts["absent"]:
            text += f", {counts['absent']} left out on purpose"
        if counts["known"]:
            text += f", {counts['known']} known issues of the row"
        if self.timed_out_in:
            return f"{text}; timed out importing {self.timed_out_in}"
        if self.crashed:
            return f"{text}; the probe crashed: {self.crashed}"
        first = self.failures()[:1]
        return text + (f" (first: {first[0].line().strip()})" if first else "")

    def text(self) -> str:
        """The report, one line per module."""
        lines = [f"import probe ({self.seconds:.1f}s): {self.summary()}"]
        return "\n".join(lines + [m.line() for m in self.modules]) + "\n"

    def to_json(self) -> dict[str, Any]:
        """Plain data for --json and the proof record."""
        return {
            "ok": self.ok,
            "seconds": round(self.seconds, 2),
            "summary": self.summary(),
            "timed_out_in": self.timed_out_in,
            "modules": [{k: v for k, v in vars(m).items() if v not in (None, "")} for m in self.modules],
        }


def run_probe(
    python: Path,
    engine: str,
    timeout: float,
    env: Mapping[str, str] | None = None,
    *,
    gpu_only: Mapping[str, str] | None = None,
    left_out: Mapping[str, str] | None = None,
    known: Mapping[str, str] | None = None,
    shards: int | None = None,
) -> ProbeResult:
    """Import the training run's modules with `python`; a hang ends at `timeout` naming its module.

    In `shards` processes at once (default: one per two cores, at most MAX_SHARDS), each importing
    every n-th module: torch loads in each, so on a host with cores to spare (a GPU node) the wall
    time is near the slowest single import; half the cores leave room for the imports' own threads."""
    start = time.monotonic()
    argv = [str(python), str(script_path("import_probe")), engine, "-", json.dumps(dict(gpu_only or {}))]
    argv += [json.dumps(dict(left_out or {}))] if left_out or known else []
    argv += [json.dumps(dict(known))] if known else []
    count = shards or max(1, min((online_cpus() or 1) // 2, MAX_SHARDS))
    base = dict(os.environ if env is None else env)
    envs = [None if count == 1 else {**base, SHARD_VARIABLE: f"{i}/{count}"} for i in range(count)]
    if count == 1:
        runs = [_one(argv, timeout, env)]
    else:
        with ThreadPoolExecutor(count) as pool:
            runs = list(pool.map(lambda e: _one(argv, timeout, e), envs))
    seconds = time.monotonic() - start
    results = [
        m for group in itertools.zip_longest(*(r.modules for r in runs)) for m in group if m is not None
    ]
    hung = next((r.current or "start-up" for r in runs if r.hung), None)
    if hung is not None:
        return ProbeResult(modules=tuple(results), seconds=seconds, timed_out_in=hung)
    crashed = next((r.crashed for r in runs if r.crashed), None)
    return ProbeResult(modules=tuple(results), seconds=seconds, crashed=crashed)


MAX_SHARDS = 4  # each shard loads torch (about 1 GB of memory): a few at most
SHARD_VARIABLE = "VERL_SETUP_PROBE_SHARD"


@dataclass(frozen=True, kw_only=True)
class _Run:
    """One probe process: its module results, and whether (and where) it hung or crashed."""

    modules: tuple[ModuleResult, ...]
    current: str | None
    hung: bool
    crashed: str | None


def _one(argv: list[str], timeout: float, env: Mapping[str, str] | None) -> _Run:
    error = None
    try:
        out = stream(argv, timeout=timeout, env=env)
        stdout, stderr, code = out.stdout, out.stderr, out.returncode
    except ProgramError as exc:
        stdout, stderr, code = exc.stdout, "", None
        error = str(exc)
    results, current = [], None
    for line in stdout.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if "start" in item:
            current = item["start"]
        elif "module" in item:
            results.append(ModuleResult(**item))
            current = None
    hung = error is not None or (code not in (0, None) and current is not None)
    crashed = None
    if not hung and code not in (0, None):
        crashed = (stderr.strip().splitlines() or [f"exit {code}"])[-1]
    return _Run(modules=tuple(results), current=current, hung=hung, crashed=crashed)
