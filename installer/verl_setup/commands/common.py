"""Where argparse ends: the shared flags (target machine, flash-attn) as typed inputs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from verl_setup.errors import BadInputError
from verl_setup.plan.make import PlanInputs
from verl_setup.plan.target import Request

if TYPE_CHECKING:
    from verl_setup.plan.recipe import Choice


def plan_inputs(args: argparse.Namespace) -> PlanInputs:
    """The plan flags (cli.add_plan_flags) as PlanInputs."""
    request = Request(
        driver=args.driver,
        gpus=tuple(args.gpu),
        sm=args.sm,
        gpu_count=args.gpu_count,
        no_gpu=args.no_gpu,
        python=args.python,
        arch=args.arch,
        glibc=args.glibc,
        verl=args.verl,
        engine=args.engine,
        backend=args.backend,
        policy=args.policy,
        host_file=args.host,
    )
    return PlanInputs(request=request, matrix=args.matrix, row=args.row)


def wheel_sources(args: argparse.Namespace) -> tuple[str, ...]:
    """--wheel-source SRC (cli.add_recipe_flags), in the order given."""
    return tuple(getattr(args, "wheel_source", None) or ())


def extension_requests(args: argparse.Namespace) -> dict[str, Choice]:
    """--build NAME / --build-flash-attn / --without NAME (cli.add_recipe_flags) as the recipe's requests."""
    build = set(args.build or ()) | ({"flash-attn"} if args.build_flash_attn else set())
    without = set(args.without or ())
    both = sorted(build & without)
    if both:
        raise BadInputError(f"--build {both[0]} and --without {both[0]} contradict each other")
    requests: dict[str, Choice] = dict.fromkeys(sorted(build), "build")
    requests.update(dict.fromkeys(sorted(without), "without"))
    return requests
