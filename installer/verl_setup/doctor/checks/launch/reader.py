"""The launch rules' reader: the config keys they read, and a reader of the launch's effective
values that records each value it reads as evidence (once)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verl_setup.doctor.probes.launch_command import Resolver
from verl_setup.doctor.probes.verl_config import MISSING
from verl_setup.doctor.result import Evidence

ROLLOUT = "actor_rollout_ref.rollout"
ACTOR = "actor_rollout_ref.actor"
MODEL = "actor_rollout_ref.model.path"

Note = Callable[[str], Any]


def noter(r: Resolver, evidence: list[Evidence]) -> Note:
    """A reader of effective values that records each one it reads as evidence (once)."""
    seen: set[str] = {e.name for e in evidence}

    def note(key: str) -> Any:
        value, source = r.value(key)
        if value is not MISSING and key not in seen:
            seen.add(key)
            evidence.append(Evidence(name=key, value=repr(value), source=source))
        return value

    return note


def ints(*values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)
