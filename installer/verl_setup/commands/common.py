"""Where argparse ends: the shared flags (target machine, flash-attn) as typed inputs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from verl_setup.errors import BadInputError
from verl_setup.plan.make import PlanInputs
from verl_setup.plan.target import Request

if TYPE_CHECKING:
    from verl_setup.plan.recipe import FlashAttnRequest


def plan_inputs(args: argparse.Namespace) -> PlanInputs:
    """The plan flags (cli.add_plan_flags) as PlanInputs."""
    request = Request(
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
    return PlanInputs(request=request, matrix=args.matrix, row=args.row)


def flash_attn_request(args: argparse.Namespace) -> FlashAttnRequest:
    """--build-flash-attn / --without flash-attn (cli.add_recipe_flags) as the recipe's request."""
    without = set(args.without or ())
    if args.build_flash_attn and "flash-attn" in without:
        raise BadInputError("--build-flash-attn and --without flash-attn contradict each other")
    if "flash-attn" in without:
        return "without"
    return "build" if args.build_flash_attn else "auto"
