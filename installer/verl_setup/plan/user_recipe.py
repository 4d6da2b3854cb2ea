"""Recipe + the user's packages: a verl of theirs takes the verl step's place, and one step of their
own comes after the row's, asking for every row pin again beside their packages, so one uv
resolve decides them with the row and none of the row's pins can move (in an image: a layer of
its own after the row's, so a change to them leaves torch's layers cached)."""

from __future__ import annotations

from dataclasses import replace

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from verl_setup.plan.steps import Recipe, Step
from verl_setup.plan.user_packages import UserPackages, UserRequirement

STEP = "with"


def with_user_packages(recipe: Recipe, user: UserPackages) -> Recipe:
    """The recipe with the user's packages; the same recipe when there are none."""
    if not user.requirements:
        return replace(recipe, user=user)
    steps = list(recipe.steps)
    verify = recipe.verify_pins
    verl = user.verl
    if verl is not None:
        steps = [_with_verl(s, recipe, verl) if s.name == "verl" else s for s in steps]
        # Their verl is checked by verify_user (environment/user_verify.py), not against the row's pin.
        verify = tuple(p for p in verify if _name(p) != "verl")
    final = next((s for s in steps if s.name == "verl"), None)
    added = user.added
    if added and final is not None:
        names = ", ".join(r.name for r in added)
        steps.append(
            Step(
                name=STEP,
                title=f"your packages: {names} (with every row pin again, so none moves)",
                requirements=(*final.requirements, *(a for r in added for a in r.uv_args())),
                index_url=final.index_url,
                overrides=final.overrides,
                binary_only=False,
            )
        )
    return replace(recipe, steps=tuple(steps), verify_pins=verify, user=user)


def row_constraints(recipe: Recipe) -> list[str]:
    """The pins a resolve with the user's packages holds fixed: the row's (a list that more pins,
    such as a recorded closure, can join). A user's verl frees the row's verl pin."""
    pins = list(recipe.verify_pins)
    if recipe.user.verl is not None:
        pins = [p for p in pins if _name(p) != "verl"]
    return [_bare(p) for p in pins]


def _with_verl(step: Step, recipe: Recipe, verl: UserRequirement) -> Step:
    """The verl step with the user's verl in place of the row's, with the row's extras."""
    extras = tuple(sorted({*recipe.row.verl.extras, *verl.extras}))
    theirs = replace(verl, extras=extras)
    if verl.kind != "path":
        url = Requirement(verl.text).url
        theirs = replace(verl, text=f"verl{'[' + ','.join(extras) + ']' if extras else ''} @ {url}")
    rest = tuple(r for r in step.requirements if _name(r) != "verl")
    where = f"from {verl.path} (editable)" if verl.editable else f"from {verl.url}"
    return replace(
        step,
        requirements=(*theirs.uv_args(), *rest),
        title=f"your verl {where}, with every row pin again so nothing drifts",
        sdists=(*step.sdists, "verl"),  # a checkout or a git URL is a source tree, built on purpose
    )


def _name(requirement: str) -> str:
    try:
        return canonicalize_name(Requirement(requirement).name)
    except Exception:  # noqa: BLE001  # `-e` and a path are no requirement: never a row pin
        return ""


def _bare(pin: str) -> str:
    """A constraint cannot carry extras (uv refuses `verl[x]==1` there)."""
    req = Requirement(pin)
    return f"{req.name}{req.specifier}" + (f" ; {req.marker}" if req.marker else "")
