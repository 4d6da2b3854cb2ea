"""`verl-setup doctor`: flags -> doctor Options, run the checks, print text or JSON, exit 5 on a fail."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TextIO

from verl_setup.doctor.context import Options
from verl_setup.doctor.result import report_json, report_text
from verl_setup.doctor.run import make_context, run_checks, selected
from verl_setup.errors import CheckFailedError
from verl_setup.output import envelope
from verl_setup.plan.target import from_env


def options_from_args(args: argparse.Namespace) -> Options:
    """The doctor flags as Options (a leading `--` before the launch command is dropped)."""
    launch = list(args.launch)
    if launch and launch[0] == "--":
        launch = launch[1:]
    return Options(
        checks=tuple(args.check),
        prefix=args.prefix,
        ray_address=args.ray_address,
        model_size=args.model_size,
        launch=tuple(launch),
        matrix=args.matrix,
    )


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Print the report (text or JSON), then exit 5 if anything failed."""
    options = options_from_args(args)
    selected(options.checks)  # bad ids are bad input (exit 2), before any probe runs
    host = from_env(args.host, env, "VERL_SETUP_HOST")
    results = run_checks(make_context(options, env, host))
    out.write(envelope(report_json(results)) if args.json else report_text(results))
    out.flush()
    return CheckFailedError.exit_code if any(r.status == "fail" for r in results) else 0
