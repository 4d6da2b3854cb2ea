"""`verl-setup doctor`: flags -> doctor Options -> diagnose.doctor_job.examine (the checks, and a failed
Ray session's hint) -> print text or JSON, exit 5 on a fail."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.diagnose.doctor_job import examine
from verl_setup.doctor.context import Options
from verl_setup.doctor.result import env_line, report_text
from verl_setup.errors import CheckFailedError
from verl_setup.output import envelope
from verl_setup.plan.target import from_env
from verl_setup.util.vocab import CHECK_IDS


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The doctor flags, and the launch command after `--`."""
    p.add_argument("--json", action="store_true", help="machine-readable report")
    p.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="ID",
        help=f"run only this check (repeatable): {', '.join(CHECK_IDS)}",
    )
    p.add_argument(
        "--prefix", type=Path, metavar="PATH",
        help="the venv to inspect (default: the active $VIRTUAL_ENV, the team config's prefix, ./.venv)",
    )  # fmt: skip
    p.add_argument("--ray-address", metavar="ADDR", help="Ray head (default RAY_ADDRESS, then a local head)")
    p.add_argument("--model-size", metavar="SIZE", help="space a model download needs (default 16GB)")
    p.add_argument("--host", type=Path, metavar="FILE", help="a saved `verl-setup detect --json`")
    p.add_argument(
        "--matrix", type=Path, metavar="FILE", help="use this rows file instead of the bundled one"
    )
    p.add_argument(
        "--bucket-numel", type=int, metavar="N",
        help="collective: also time an all-gather of N elements (a failed run's NumelOut; default: "
        "estimated from the launch's model folder) against actor_rollout_ref.nccl_timeout",
    )  # fmt: skip
    p.add_argument("launch", nargs="*", metavar="-- LAUNCH COMMAND", help="the training command to lint")
    p.set_defaults(run=run)


def options_from_args(args: argparse.Namespace) -> Options:
    """The doctor flags as Options (a leading `--` before the launch command is dropped)."""
    launch = list(args.launch)
    if launch and launch[0] == "--":
        launch = launch[1:]
    return Options(
        checks=tuple(args.check),
        prefix=args.prefix,
        config_prefix=_config_prefix(args),
        workdir=Path.cwd(),
        ray_address=args.ray_address,
        model_size=args.model_size,
        launch=tuple(launch),
        matrix=args.matrix,
        bucket_numel=args.bucket_numel,
    )


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Print the report (text or JSON), then exit 5 if anything failed."""
    report = examine(options_from_args(args), env, from_env(args.host, env, "VERL_SETUP_HOST"))
    if args.json:
        out.write(envelope("doctor", report.to_json(), error=report.error()))
    else:
        hint = f"hint: {report.hint}\n" if report.hint else ""
        out.write(env_line(report.context) + report_text(report.results) + hint)
    out.flush()
    return CheckFailedError.exit_code if report.failed else 0


def _config_prefix(args: argparse.Namespace) -> Path | None:
    found = getattr(args, "team_config", None)
    prefix = None if found is None else found.values.get("prefix")
    return Path(prefix) if prefix else None
