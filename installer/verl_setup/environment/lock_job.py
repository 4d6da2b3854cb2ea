"""Making a lock, written once for `lock`, `bundle` and `install`: plan -> the row's recipe -> the
user's packages -> the wheels picked for the packages built against torch -> uv's resolution with
hashes (environment/lock.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from verl_setup.output import Progress
from verl_setup.plan.make import PlanInputs, make_plan
from verl_setup.plan.recipe import recipe_for
from verl_setup.plan.select import Plan
from verl_setup.plan.steps import ExtensionRequests, Recipe
from verl_setup.plan.user_packages import UserPackages

LockFormat = Literal["requirements", "pylock"]


@dataclass(frozen=True, kw_only=True)
class LockRequest:
    """What to lock: the plan's inputs, and the recipe flags (--build/--without, --wheel-source, --with)."""

    plan: PlanInputs
    extensions: ExtensionRequests = field(default_factory=dict)
    wheel_sources: tuple[str, ...] = ()
    user: UserPackages = field(default_factory=UserPackages)
    format: LockFormat = "requirements"


@dataclass(frozen=True, kw_only=True)
class MadeLock:
    """A lock made from a request: its text, and the plan and recipe it came from."""

    plan: Plan
    recipe: Recipe
    text: str
    pins: int

    @property
    def sha256(self) -> str:
        """The lock text's sha256 (`lock --json`)."""
        return hashlib.sha256(self.text.encode()).hexdigest()


def planned_recipe(
    plan: Plan,
    *,
    extensions: ExtensionRequests,
    wheel_sources: tuple[str, ...],
    user: UserPackages,
    env: Mapping[str, str],
    say: Callable[[str], None],
    pick_wheels: bool = True,
) -> Recipe:
    """The plan's recipe with the user's packages (a requirement a row pin refuses stops here) and,
    with `pick_wheels`, the prebuilt wheel each package built against torch comes from."""
    recipe = user_recipe(plan, recipe_for(plan, extensions, env, wheel_sources), user)
    if not pick_wheels or all(e.mode != "wheel" or e.url is not None for e in recipe.extensions):
        return recipe  # nothing to pick: the index client is not even imported
    from verl_setup.environment.wheel_pick import resolve_wheels  # noqa: PLC0415

    return resolve_wheels(plan, recipe, say)


def user_recipe(plan: Plan, recipe: Recipe, user: UserPackages) -> Recipe:
    """The recipe with the user's packages; a requirement a row pin refuses stops here (no network)."""
    if not user.requirements:  # nothing to add, nothing to refuse: as with_user_packages does
        return replace(recipe, user=user)
    from verl_setup.environment.with_resolve import direct_conflicts  # noqa: PLC0415
    from verl_setup.plan.user_recipe import with_user_packages  # noqa: PLC0415

    recipe = with_user_packages(recipe, user)
    direct_conflicts(plan, recipe)
    return recipe


def pinned(user: UserPackages, env: Mapping[str, str]) -> UserPackages:
    """The user's packages with every git ref at its full commit (what a lock, an image and a
    bundle record); --keep refused, since only an install has an environment to keep from."""
    from verl_setup.errors import BadInputError  # noqa: PLC0415
    from verl_setup.plan.verl_source import pin_commits  # noqa: PLC0415

    if user.keep:
        raise BadInputError(
            f"--keep {user.keep[0]} keeps a package as the environment at the prefix has it: it is an "
            "install flag (a lock, a rendered file or a bundle has no installed environment to keep from)"
        )
    return pin_commits(user, dict(env)) if user.requirements else user


def make_lock(
    request: LockRequest,
    env: Mapping[str, str],
    progress: Progress,
    *,
    step: str = "plan",
    before_resolve: Callable[[Plan, Recipe], Recipe] | None = None,
    uv: tuple[str, Mapping[str, str]] | None = None,
) -> MadeLock:
    """Resolve the planned row with hashes. `before_resolve` may rewrite or refuse the recipe
    (bundle's); `uv` is (uv, its environment) when the caller has them already."""
    from verl_setup.environment.lock import compile_lock, compile_pylock, parse, parse_pylock  # noqa: PLC0415
    from verl_setup.environment.user_lock import local_warnings  # noqa: PLC0415
    from verl_setup.environment.uv import uv_and_env  # noqa: PLC0415

    plan = make_plan(request.plan, env)
    user = pinned(request.user, env)
    recipe = planned_recipe(
        plan,
        extensions=request.extensions,
        wheel_sources=request.wheel_sources,
        user=user,
        env=env,
        say=progress.say,
    )
    if before_resolve is not None:
        recipe = before_resolve(plan, recipe)
    progress.step(step, f"row {plan.row.id}, Python {plan.python}; resolving with hashes")
    for warning in (*recipe.warnings, *local_warnings(recipe)):
        progress.say(f"warning: {warning}")
    exe, uv_environment = uv if uv is not None else uv_and_env(env, progress.say)
    pylock = request.format == "pylock"
    text = (compile_pylock if pylock else compile_lock)(plan, recipe, uv=exe, env=uv_environment)
    pins = len((parse_pylock if pylock else parse)(text, Path("<new lock>")).pins)
    return MadeLock(plan=plan, recipe=recipe, text=text, pins=pins)


def lock_to(request: LockRequest, out: Path | None, env: Mapping[str, str], progress: Progress) -> MadeLock:
    """`lock`'s use case: make the lock, then write it to `out` (atomically) when given. A pylock
    file's name must carry the row (PEP 751): checked before the resolve, where it costs nothing."""
    from verl_setup.environment.lock import write_lock  # noqa: PLC0415
    from verl_setup.environment.pylock import check_name  # noqa: PLC0415

    def named_for_its_row(plan: Plan, recipe: Recipe) -> Recipe:
        if request.format == "pylock" and out is not None:
            check_name(out, plan.row.id)
        return recipe

    made = make_lock(request, env, progress, before_resolve=named_for_its_row)
    if out is not None:
        write_lock(out, made.text)
        progress.step("done", f"wrote {out}: {made.pins} distributions with hashes")
    return made
