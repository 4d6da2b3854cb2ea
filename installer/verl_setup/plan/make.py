"""Glue from command-line arguments to a Plan: matrix, target facts, selection."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from verl_setup.host.detect import detect
from verl_setup.host.facts import load_host_file
from verl_setup.matrix.load import load_matrix
from verl_setup.plan.select import Plan, plan_row, select
from verl_setup.plan.target import Request, build_target


def request_from_args(args: argparse.Namespace) -> Request:
    """The plan flags as a Request."""
    return Request(
        driver=args.driver,
        gpus=tuple(args.gpu),
        sm=args.sm,
        gpu_count=args.gpu_count,
        no_gpu=args.no_gpu,
        python=args.python,
        verl=args.verl,
        engine=args.engine,
        policy=args.policy,
        host_file=args.host,
    )


def make_plan(
    request: Request, matrix_path: Path | None, env: Mapping[str, str], row_id: str | None = None
) -> Plan:
    """Load the matrix (given, VERL_SETUP_MATRIX, bundled), build the target, select (or take `row_id`)."""
    if matrix_path is None and env.get("VERL_SETUP_MATRIX"):
        matrix_path = Path(env["VERL_SETUP_MATRIX"])
    matrix = load_matrix(matrix_path)
    target = build_target(request, env=env, rules=matrix.cuda, detect=detect, load_host=load_host_file)
    return select(target, matrix) if row_id is None else plan_row(target, matrix, row_id)


def plan_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> Plan:
    """make_plan for a command that took the plan flags (cli.add_plan_flags)."""
    return make_plan(request_from_args(args), args.matrix, env, getattr(args, "row", None))
