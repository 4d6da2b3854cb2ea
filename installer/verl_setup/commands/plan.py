"""`verl-setup plan`: select the matrix row for a machine and say why, as text or JSON."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import extension_requests, plan_for, user_packages, wheel_sources
from verl_setup.commands.flags import add_plan_flags, add_recipe_flags
from verl_setup.commands.text_output import plan_text
from verl_setup.output import envelope


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
    add_plan_flags(p)
    add_recipe_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Plan and print (one row for every node with --cluster)."""
    if args.cluster is not None:
        from verl_setup.commands import plan_cluster  # noqa: PLC0415

        return plan_cluster.run(args, env, out)
    from verl_setup.plan.outlook import outlook, outlook_lines  # noqa: PLC0415

    plan = plan_for(args, env)
    if args.known_issues and not args.json:
        from verl_setup.plan.explain import known_issues_text  # noqa: PLC0415

        out.write(known_issues_text(plan.row))
        return 0
    entries = outlook(plan, requests=extension_requests(args), wheel_sources=wheel_sources(args), env=env)
    user = user_packages(args)
    resolved = []
    if user.requirements:
        from verl_setup.environment.with_resolve import Resolved, plan_user_packages  # noqa: PLC0415

        # --explain resolves them with the row (uv, the index); a plain plan names them as asked.
        resolved = (
            plan_user_packages(plan, user, env=env)
            if args.explain
            else [Resolved(requirement=r, version=None) for r in user.requirements]
        )
    if args.json:
        extra = {"with": [r.to_json() for r in resolved]} if resolved else {}
        out.write(envelope("plan", {**plan.to_json(), "extensions": entries, **extra}))
    else:
        text = plan_text(plan, explain=args.explain or args.all_rows, all_rows=args.all_rows)
        head, _, rest = text.partition("\ninstall    ")
        lines = outlook_lines(entries) + [r.line() for r in resolved]
        if args.explain and getattr(args, "team_config", None) is not None:
            lines += args.team_config.explain_lines()  # prefix, CA bundle, index, wheel sources
        out.write(head + "\ninstall    " + rest.replace("\n", "\n" + "".join(f"{x}\n" for x in lines), 1))
    return 0
