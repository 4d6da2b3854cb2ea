"""`verl-setup plan`: select the matrix row for a machine and say why, as text or JSON.

Flags -> PlanRequest -> doctor.plan_job.plan_machine -> print (--cluster: commands/plan_cluster.py)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import extension_requests, plan_inputs, user_packages, wheel_sources
from verl_setup.commands.flags import add_plan_flags, add_recipe_flags
from verl_setup.commands.text_output import plan_text
from verl_setup.doctor.plan_job import FitRequest, PlanRequest, plan_machine
from verl_setup.errors import BadInputError, CheckFailedError
from verl_setup.output import envelope
from verl_setup.plan.target import from_env


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The plan flags."""
    p.add_argument("--json", action="store_true", help="machine-readable plan")
    p.add_argument("--explain", action="store_true", help="the facts, the evidence, and why other rows lost")
    p.add_argument("--all-rows", action="store_true", help="with --explain: every other row and its reasons")
    p.add_argument(
        "--known-issues", action="store_true", help="the selected row's known issues in full, with sources"
    )
    p.add_argument(
        "--cluster", type=Path, metavar="FILE", help="one row for every node of a cluster file (detect --ray)"
    )
    p.add_argument(
        "--launch", action="store_true",
        help="also estimate whether the training command after `--` fits each GPU of the host "
        "(the planner of `doctor --check fit`; an estimate)",
    )  # fmt: skip
    p.add_argument(
        "launch_command", nargs="*", metavar="-- LAUNCH COMMAND", help="with --launch: the training command"
    )
    add_plan_flags(p)
    add_recipe_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Plan and print (one row for every node with --cluster); with --launch, the memory estimate
    for the launch too (exit 5 when it does not fit, as `doctor --check fit`)."""
    fit = _fit_request(args, env)
    if args.cluster is not None:
        from verl_setup.commands import plan_cluster  # noqa: PLC0415

        return plan_cluster.run(args, env, out)
    request = PlanRequest(
        inputs=plan_inputs(args),
        extensions=extension_requests(args),
        wheel_sources=wheel_sources(args),
        user=user_packages(args),
        explain=args.explain,
        row_only=args.known_issues and not args.json,
        fit=fit,
    )
    report = plan_machine(request, env)
    if request.row_only:
        from verl_setup.plan.explain import known_issues_text  # noqa: PLC0415

        out.write(known_issues_text(report.plan.row))
        return 0
    if args.json:
        out.write(envelope("plan", report.to_json()))
    else:
        from verl_setup.plan.outlook import outlook_lines  # noqa: PLC0415

        text = plan_text(report.plan, explain=args.explain or args.all_rows, all_rows=args.all_rows)
        head, _, rest = text.partition("\ninstall    ")
        lines = outlook_lines(report.extensions) + [r.line() for r in report.resolved]
        if args.explain and getattr(args, "team_config", None) is not None:
            lines += args.team_config.explain_lines()  # prefix, CA bundle, index, wheel sources
        out.write(head + "\ninstall    " + rest.replace("\n", "\n" + "".join(f"{x}\n" for x in lines), 1))
        if report.fit is not None:
            from verl_setup.doctor.result import report_text  # noqa: PLC0415  # with --launch only

            out.write("\n" + report_text([report.fit], footer=False))
    return 0 if report.fits else CheckFailedError.exit_code


def _fit_request(args: argparse.Namespace, env: Mapping[str, str]) -> FitRequest | None:
    """--launch's flags (checked before planning: a bad launch is bad input before any output)."""
    if not args.launch:
        if args.launch_command:
            raise BadInputError("a launch command after `--` needs --launch (plan --launch -- COMMAND)")
        return None
    if args.cluster is not None:
        raise BadInputError("--launch estimates one host's GPUs: give --host, not --cluster")
    from verl_setup.doctor.fit_launch import launch_of  # noqa: PLC0415

    found = getattr(args, "team_config", None)
    prefix = None if found is None else found.values.get("prefix")
    return FitRequest(
        launch=launch_of(args.launch_command),
        host=from_env(args.host, env, "VERL_SETUP_HOST"),
        matrix=args.matrix,
        config_prefix=Path(prefix) if prefix else None,
    )
