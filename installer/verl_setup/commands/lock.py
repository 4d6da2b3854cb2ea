"""`verl-setup lock`: plan, resolve with hashes, write the lock (atomically) or print it, as a
hashed requirements file (the default) or PEP 751's pylock.toml (`--format pylock`)."""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import extension_requests, plan_for, wheel_sources, with_user_packages
from verl_setup.commands.flags import add_plan_flags, add_recipe_flags
from verl_setup.environment.lock import compile_lock, compile_pylock, parse, parse_pylock, write_lock
from verl_setup.environment.pylock import check_name
from verl_setup.environment.user_lock import local_warnings
from verl_setup.environment.uv import uv_and_env
from verl_setup.errors import BadInputError
from verl_setup.output import Progress, envelope
from verl_setup.plan.recipe import recipe_for


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The lock flags."""
    p.add_argument("--out", type=Path, metavar="FILE", help="write the lock here (default: stdout)")
    p.add_argument(
        "--format",
        choices=("requirements", "pylock"),
        default="requirements",
        help="requirements: a hashed requirements file (uv pip sync, pip install --no-deps -r, "
        "install --lock); pylock: PEP 751 pylock.toml (--out pylock.NAME.toml)",
    )
    p.add_argument("--json", action="store_true", help="describe the written lock")
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
    if args.format == "pylock" and not to_stdout:
        check_name(Path(args.out), plan.row.id)
    recipe = with_user_packages(
        args, plan, recipe_for(plan, extension_requests(args), env, wheel_sources(args)), env
    )
    from verl_setup.environment.wheel_pick import resolve_wheels  # noqa: PLC0415

    recipe = resolve_wheels(plan, recipe, progress.say)
    progress.step("plan", f"row {plan.row.id}, Python {plan.python}; resolving with hashes")
    for warning in (*recipe.warnings, *local_warnings(recipe)):
        progress.say(f"warning: {warning}")
    write = compile_pylock if args.format == "pylock" else compile_lock
    uv, uv_environment = uv_and_env(env, progress.say)
    text = write(plan, recipe, uv=uv, env=uv_environment)
    pins = len((parse_pylock if args.format == "pylock" else parse)(text, Path("<new lock>")).pins)
    if to_stdout:
        out.write(text)
        return 0
    path = Path(args.out)
    write_lock(path, text)
    progress.step("done", f"wrote {path}: {pins} distributions with hashes")
    if args.json:
        summary = {
            "out": str(path),
            "format": args.format,
            "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "row": plan.row.id,
            "python": plan.python,
            "distributions": pins,
        }
        out.write(envelope("lock", summary))
    return 0
