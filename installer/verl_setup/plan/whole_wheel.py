"""A wheel that carries a whole project built against torch (verl's wheelhouse serves
TransformerEngine so: its Python package, CUDA core and `transformer_engine_torch` module in one
`transformer-engine` wheel). The recipe then installs that wheel in place of the package and its
companions: no other step asks for them, and verify expects the one distribution instead."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from verl_setup.matrix.schema import ExtensionFacts

if TYPE_CHECKING:
    from verl_setup.plan.steps import ExtensionPlan, Recipe


def _name(requirement: str) -> str:
    return canonicalize_name(re.split(r"[\[=@ ;<>!~]", requirement, maxsplit=1)[0])


def in_place_of(recipe: Recipe, facts: Mapping[str, ExtensionFacts]) -> Recipe:
    """The recipe with every whole-project wheel taking the place of what it replaces."""
    for ext in recipe.extensions:
        if ext.mode == "wheel" and ext.distribution is not None:
            recipe = _replace(recipe, ext, facts[ext.name])
    return recipe


def _without(requirements: tuple[str, ...], gone: frozenset[str]) -> tuple[str, ...]:
    return tuple(r for r in requirements if _name(r) not in gone)


def replaced_names(ext: ExtensionPlan, facts: ExtensionFacts) -> frozenset[str]:
    """The distributions the whole wheel stands for (the package, its companions), normalized."""
    return frozenset(canonicalize_name(n) for n in (ext.name, *facts.companions))


def _replace(recipe: Recipe, ext: ExtensionPlan, facts: ExtensionFacts) -> Recipe:
    gone = replaced_names(ext, facts)
    steps = tuple(
        step
        if step.name == ext.name
        else dataclasses.replace(step, requirements=_without(step.requirements, gone))
        for step in recipe.steps
    )
    pins = [p for p in recipe.verify_pins if _name(p) not in gone]
    pins.append(f"{ext.distribution}=={ext.version}")
    return dataclasses.replace(recipe, steps=steps, verify_pins=tuple(dict.fromkeys(pins)))
