"""Where argparse ends: the shared flags (target machine, flash-attn) as typed inputs."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from verl_setup.errors import BadInputError
from verl_setup.plan.make import PlanInputs
from verl_setup.plan.request import Request
from verl_setup.plan.user_packages import UserPackages, collect

if TYPE_CHECKING:
    from verl_setup.plan.steps import Choice
    from verl_setup.render.templates import RenderOptions


def plan_inputs(args: argparse.Namespace) -> PlanInputs:
    """The plan flags (flags.add_plan_flags) as PlanInputs."""
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
        prefer=getattr(args, "prefer", None),
        host_file=args.host,
        npu=getattr(args, "npu", None),
        cann=getattr(args, "cann", None),
        rocm=getattr(args, "rocm", None),
        **config_of(args),
    )
    return PlanInputs(request=request, matrix=args.matrix, row=args.row, verl_checkout=_verl_checkout(args))


def user_packages(args: argparse.Namespace) -> UserPackages:
    """--with/--with-requirements/--with-editable/--keep and the team config's with* keys (memoized
    on args: several callers ask, and each parse reads the checkouts)."""
    cached = getattr(args, "_user_packages", None)
    if isinstance(cached, UserPackages):
        return cached
    found = getattr(args, "team_config", None)
    packages = collect(
        with_=list(getattr(args, "with_", None) or ()),
        with_requirements=list(getattr(args, "with_requirements", None) or ()),
        with_editable=list(getattr(args, "with_editable", None) or ()),
        keep=list(getattr(args, "keep", None) or ()),
        config=None if found is None else dict(found.lists),
        config_path=None if found is None else found.path,
    )
    args._user_packages = packages
    return packages


def pinned_user_packages(args: argparse.Namespace, env: Mapping[str, str]) -> UserPackages:
    """The user's packages with every git ref at its full commit (what a rendered file records)."""
    from verl_setup.environment.lock_job import pinned  # noqa: PLC0415

    return pinned(user_packages(args), env)


def _verl_checkout(args: argparse.Namespace) -> str | None:
    verl = user_packages(args).verl
    if verl is None:
        return None
    from verl_setup.plan.verl_source import requested_version  # noqa: PLC0415  # packaging's grammar

    return requested_version(verl)


def config_of(args: argparse.Namespace) -> dict[str, Any]:
    """The team config cli.py found (none under --no-config) as Request fields."""
    found = getattr(args, "team_config", None)
    if found is None:
        return {}
    sources = {key: found.source_of(key) for key in found.values}
    return {"config": found.values, "config_source": found.source, "config_sources": sources}


def wheel_sources(args: argparse.Namespace) -> tuple[str, ...]:
    """--wheel-source SRC (cli.add_recipe_flags) in the order given, then the config files'
    wheel_sources (VERL_SETUP_WHEEL_SOURCES's come after both: plan/wheel_sources.user_sources)."""
    found = getattr(args, "team_config", None)
    configured = () if found is None else found.lists.get("wheel_sources", ())
    return (*(getattr(args, "wheel_source", None) or ()), *configured)


def extension_requests(args: argparse.Namespace) -> dict[str, Choice]:
    """--build NAME / --build-flash-attn / --without NAME (flags.add_recipe_flags) as requests."""
    build = set(args.build or ()) | ({"flash-attn"} if args.build_flash_attn else set())
    without = set(args.without or ())
    both = sorted(build & without)
    if both:
        raise BadInputError(f"--build {both[0]} and --without {both[0]} contradict each other")
    requests: dict[str, Choice] = dict.fromkeys(sorted(build), "build")
    requests.update(dict.fromkeys(sorted(without), "without"))
    return requests


def render_options(args: argparse.Namespace, env: Mapping[str, str], targets: list[str]) -> RenderOptions:
    """RenderOptions from the artifact flags (flags.add_artifact_flags), for `targets` (render's
    TARGET arguments; docker build's is the docker target alone)."""
    from verl_setup.render.templates import RenderOptions, expand_targets  # noqa: PLC0415
    from verl_setup.render.values import container_spec  # noqa: PLC0415

    if args.nodes < 1:
        raise BadInputError(f"--nodes {args.nodes}: need at least 1")
    return RenderOptions(
        targets=expand_targets(targets),
        base_image=args.base_image,
        buildkit=args.buildkit,
        ca_bundle=args.ca_bundle,
        container=container_spec(args.container) if args.container else None,
        hf_home=args.hf_home,
        iface=args.iface,
        image=args.image,
        job=args.job,
        nodes=args.nodes,
        head_ip=args.head_ip,
        ray_port=args.ray_port,
        dashboard_port=args.dashboard_port,
        venv=args.venv,
        namespace=args.namespace,
        gpus_per_node=args.gpu_count,
        extensions=extension_requests(args),
        wheel_sources=wheel_sources(args),
        user=pinned_user_packages(args, env),
    )
