"""`verl-setup lock`: plan, resolve with hashes, write the lock (atomically) or print it."""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import extension_requests, plan_for
from verl_setup.commands.flags import add_plan_flags, add_recipe_flags
from verl_setup.environment.lock import compile_lock, parse, write_lock
from verl_setup.environment.uv import find_uv, uv_env
from verl_setup.errors import BadInputError
from verl_setup.output import Progress, envelope
from verl_setup.plan.recipe import recipe_for


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The lock flags."""
    p.add_argument("--out", type=Path, metavar="FILE", help="write the lock here (default: stdout)")
    p.add_argument("--json", action="store_true", help="describe the written lock (schema 1)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines (warnings still print)")
    add_recipe_flags(p)
    add_plan_flags(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Resolve the planned row for its Python and platform; --out FILE, else stdout."""
    progress = Progress(quiet=args.quiet)
    to_stdout = args.out is None or str(args.out) == "-"
    if to_stdout and args.json:
        raise BadInputError("--json describes a written lock: give --out FILE")
    plan = plan_for(args, env)
    recipe = recipe_for(plan, extension_requests(args), env)
    progress.step("plan", f"row {plan.row.id}, Python {plan.python}; resolving with hashes")
    for warning in recipe.warnings:
        progress.say(f"warning: {warning}")
    text = compile_lock(plan, recipe, uv=find_uv(), env=uv_env(base=env))
    pins = len(parse(text, Path("<new lock>")).pins)
    if to_stdout:
        out.write(text)
        return 0
    path = Path(args.out)
    write_lock(path, text)
    progress.step("done", f"wrote {path}: {pins} distributions with hashes")
    if args.json:
        summary = {
            "out": str(path),
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "row": plan.row.id,
            "python": plan.python,
            "distributions": pins,
        }
        out.write(envelope(summary))
    return 0
