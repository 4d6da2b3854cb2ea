"""`verl-setup smoke`: verl's own main_ppo, 2 GRPO steps on a tiny model, in an installed environment."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.flags import whole
from verl_setup.errors import CheckFailedError
from verl_setup.output import Progress, emit
from verl_setup.smoke.text import report_text
from verl_setup.smoke.use_case import SmokeRequest, run_smoke


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The smoke flags."""
    p.add_argument(
        "--prefix", type=Path, metavar="PATH", required=True, help="an env `verl-setup install` made"
    )
    p.add_argument(
        "--model", type=Path, metavar="PATH", help="your own small HF model (default: a tiny one made here)"
    )
    p.add_argument(
        "--gpus", type=whole("GPU count", 64), default=0, metavar="N",
        help="0 (default): the CPU path (gloo, an HF rollout); N: the row's engine and FSDP on NCCL "
        "on N GPUs",
    )  # fmt: skip
    p.add_argument(
        "--ray-cpus", type=whole("Ray CPU count", 4096), default=16, metavar="N",
        help="logical CPUs of the run's private Ray (16; verl's actors each ask for one)",
    )  # fmt: skip
    p.add_argument(
        "--storage-units", type=whole("storage unit count", 64), default=1, metavar="N",
        help="TransferQueue storage units (1; verl's default is 8, one Ray CPU each)",
    )  # fmt: skip
    p.add_argument("--timeout", type=float, default=600.0, metavar="S", help="limit for main_ppo (600)")
    p.add_argument("--work", type=Path, metavar="DIR", help="the run's folder (default: a new temp folder)")
    p.add_argument("--keep", action="store_true", help="keep the run's folder after a pass")
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Run it; exit 5 naming the stage when a check fails."""
    progress = Progress(quiet=getattr(args, "quiet", False))
    request = SmokeRequest(
        prefix=args.prefix,
        model=args.model,
        gpus=args.gpus,
        ray_cpus=args.ray_cpus,
        storage_units=args.storage_units,
        timeout=args.timeout,
        work=args.work,
        keep=args.keep,
    )
    report = run_smoke(request, env, progress.say)
    error = (
        None
        if report.ok
        else CheckFailedError(f"smoke failed in stage {report.failed_stage}: {report.failure}")
    )
    if args.json:
        emit(out, "smoke", report.to_json(), error)
    else:
        out.write(report_text(report))
    if error is not None:
        raise error
    return 0
